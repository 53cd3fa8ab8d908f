"""An import stub for the `openai` Python client, which Debian does not package.

llama.cpp's server tests import `OpenAI` at the top of some files; this stub
lets those files load, so their other tests run. A test that really uses the
client fails, on serve and on the control alike, with the error below.
"""


class OpenAI:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("openai stub: the openai Python client is not installed (Debian has no python3-openai)")

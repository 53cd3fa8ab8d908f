package jsonschema

// builtin is a named rule the converter adds on demand, with the builtin
// rules its body refers to.
type builtin struct {
	body string
	deps []string
}

// spaceRule bounds the whitespace between tokens so a model cannot run away
// emitting blanks: nothing, one space, or one or two newlines and some indent.
const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

// builtins are llama.cpp's primitive and string-format rules, by name.
var builtins = map[string]builtin{
	"boolean":       {`("true" | "false")`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"integral-part": {`[0] | [1-9] [0-9]{0,15}`, nil},
	"number":        {`("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`("-"? integral-part)`, []string{"integral-part"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"`, []string{"string", "value"}},
	"array":         {`"[" space ( value ("," space value)* )? space "]"`, []string{"value"}},
	"uuid":          {`"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\""`, nil},
	"char":          {`[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"null":          {`"null"`, nil},
	// date differs from llama.cpp's, which allows any day 01-31 in any
	// month: here a month has only its days (February 28), so every date
	// the grammar spells is a real one.
	"date":             {`[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [1-2] [0-9] | "30" ) | "02" "-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )`, nil},
	"time":             {`([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":        {`date "T" time`, []string{"date", "time"}},
	"date-string":      {`"\"" date "\""`, []string{"date"}},
	"time-string":      {`"\"" time "\""`, []string{"time"}},
	"date-time-string": {`"\"" date-time "\""`, []string{"date-time"}},
}

// JSONObject is the GBNF for any JSON object, what response_format
// {"type":"json_object"} asks for; it is what ToGBNF makes of {"type":"object"}.
const JSONObject = `array ::= "[" space ( value ("," space value)* )? space "]"
boolean ::= ("true" | "false")
char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
decimal-part ::= [0-9]{1,16}
integral-part ::= [0] | [1-9] [0-9]{0,15}
null ::= "null"
number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?
object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? space "}"
root ::= object
space ::= | " " | "\n"{1,2} [ \t]{0,20}
string ::= "\"" char* "\""
value ::= object | array | string | number | boolean | null
`

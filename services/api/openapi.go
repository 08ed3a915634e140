package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"strings"

	"github.com/relay-demo/relay/internal/channel"
)

// openAPIBase is the API's OpenAPI 3.1 document without what its channels
// say: placeholders stand for the request's properties, its
// anyOf, the parts' schemas and the lists of channel names.
//
//go:embed openapi.base.json
var openAPIBase string

// OpenAPI returns the API's OpenAPI 3.1 document, as GET /openapi.json
// serves it and docs/openapi.json holds it (for channel.Builtin): the
// base document with the part schema, request property and name of every
// channel of channels filled in.
func OpenAPI(channels channel.Set) []byte {
	all := channels.All()
	var props, anyOf, parts, names bytes.Buffer
	props.WriteByte('{')
	anyOf.WriteByte('[')
	names.WriteByte('[')
	for i, c := range all {
		if i > 0 {
			props.WriteByte(',')
			anyOf.WriteByte(',')
			parts.WriteByte(',')
			names.WriteByte(',')
		}
		name, _ := json.Marshal(c.Name())
		schema, _ := json.Marshal(SchemaName(c))
		props.WriteString(string(name) + `:{"$ref":"#/components/schemas/` + SchemaName(c) + `"}`)
		anyOf.WriteString(`{"required":[` + string(name) + `]}`)
		parts.WriteString(string(schema) + ":")
		parts.Write(c.Schema())
		names.Write(name)
	}
	// When it goes out: at once, at send_at, or after delay.
	props.WriteString(`,"send_at":{"type":"string","format":"date-time","description":"Send it at this time (RFC 3339), in the future and at most 30 days ahead, instead of at once. Not with delay."}`)
	props.WriteString(`,"delay":{"type":"string","examples":["90s","15m","2h"],"description":"Send it this long from now (a duration, positive, at most 720h), instead of at once. Not with send_at."}`)
	props.WriteString(`,"type":{"type":"string","examples":["otp","receipt"],"description":"The notification's type, one of those NOTIFICATION_TYPES configures: its copies follow the type's retry schedule and are parked as expired rather than sent past the type's expiry. Absent: the default schedule. An unknown type is a 422 naming the types there are."}`)
	props.WriteByte('}')
	anyOf.WriteByte(']')
	names.WriteByte(']')
	doc := strings.NewReplacer(
		`"{{request-properties}}"`, props.String(),
		`"{{request-anyOf}}"`, anyOf.String(),
		`"{{parts}}": null`, parts.String(),
		`"{{channels}}"`, names.String(),
	).Replace(openAPIBase)
	var out bytes.Buffer
	if err := json.Indent(&out, []byte(doc), "", "  "); err != nil {
		// The base document and every channel's schema are checked JSON:
		// only a broken build gets here.
		panic("api: the OpenAPI document is not JSON: " + err.Error())
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// SchemaName is the name of a channel's part schema in the OpenAPI
// document: its Go type's name without "Part" (EmailPart: Email).
func SchemaName(c channel.Channel) string {
	return strings.TrimSuffix(c.Part().Name(), "Part")
}

package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/relay-demo/relay/internal/channel"
	"github.com/relay-demo/relay/internal/notification"
)

// requestType is the body of POST /v1/notifications: one optional field
// per channel, named after it and holding its part. The API assigns the id,
// version and creation time. It is built from the API's channels
// (Deps.Channels), so a new channel is accepted, checked and documented
// without a line here.
func requestType(all []channel.Channel) reflect.Type {
	fields := make([]reflect.StructField, 0, len(all)+2)
	for _, c := range all {
		fields = append(fields, reflect.StructField{
			Name: strings.ToUpper(c.Name()[:1]) + c.Name()[1:],
			Type: reflect.PointerTo(c.Part()),
			Tag:  reflect.StructTag(`json:"` + c.Name() + `"`),
		})
	}
	// When it goes out: at once, or at send_at, or after delay (see when).
	fields = append(fields,
		reflect.StructField{Name: "XSendAt", Type: reflect.TypeFor[*string](), Tag: `json:"send_at"`},
		reflect.StructField{Name: "XDelay", Type: reflect.TypeFor[*string](), Tag: `json:"delay"`},
		// Its type, whose retry schedule it follows (see checkType).
		reflect.StructField{Name: "XType", Type: reflect.TypeFor[*string](), Tag: `json:"type"`})
	return reflect.StructOf(fields)
}

// request decodes the notifications of one server: its channels and the
// request type of their parts, built once, by newRequest, when the server
// is.
type request struct {
	all   []channel.Channel
	names []string
	typ   reflect.Type
}

// newRequest builds the request of channels.
func newRequest(channels channel.Set) request {
	all := channels.All()
	return request{all: all, names: channels.Names(), typ: requestType(all)}
}

// decodeRequest reads exactly one JSON object from body and validates it
// as a notification. Its error is always a *Problem: 400 for a body that is
// not one well-formed request, 413 for one over the limit of an
// http.MaxBytesReader, 422 for a notification with invalid fields.
func (q request) decodeRequest(body io.Reader) (*notification.Notification, error) {
	n, _, err := q.decodeTimed(body)
	return n, err
}

// decodeTimed is decodeRequest that also returns the request's send_at
// or delay, as sent, for schedule to check.
func (q request) decodeTimed(body io.Reader) (*notification.Notification, when, error) {
	all := q.all
	req := reflect.New(q.typ)
	dec := json.NewDecoder(&depthReader{r: body})
	dec.DisallowUnknownFields()
	if err := dec.Decode(req.Interface()); err != nil {
		return nil, when{}, decodeProblem(err, dec.InputOffset(), "a request holds "+shape(all))
	}
	// Exactly one value: anything but white space after it is an error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, when{}, tooLarge(tooBig.Limit)
		}
		var tooDeep *tooDeepError
		if errors.As(err, &tooDeep) {
			return nil, when{}, malformed(tooDeep.Error())
		}
		return nil, when{}, malformed(fmt.Sprintf("unexpected data after the JSON object, at byte offset %d", dec.InputOffset()))
	}
	n := &notification.Notification{V: notification.Version, Parts: map[string]json.RawMessage{}}
	var bad notification.Invalid
	for i, c := range all {
		part := req.Elem().Field(i)
		if part.IsNil() {
			continue
		}
		if errs := c.Check(part.Interface()); len(errs) > 0 {
			bad = append(bad, errs...)
			continue
		}
		raw, err := json.Marshal(part.Interface())
		if err != nil {
			bad = append(bad, notification.FieldError{Field: c.Name(), Message: err.Error()})
			continue
		}
		n.Parts[c.Name()] = raw
	}
	if len(bad) == 0 && len(n.Parts) == 0 {
		bad = notification.Invalid{{Message: "a notification needs at least one part: " + strings.Join(q.names, ", ")}}
	}
	if len(bad) > 0 {
		return nil, when{}, invalidFields(bad)
	}
	w := when{
		SendAt: req.Elem().Field(len(all)).Interface().(*string),
		Delay:  req.Elem().Field(len(all) + 1).Interface().(*string),
	}
	if typ := req.Elem().Field(len(all) + 2).Interface().(*string); typ != nil {
		n.Type = *typ
	}
	return n, w, nil
}

// shape describes the request's fields for an error message:
// "email {to, subject, text, html}, webhook {url, payload} and sms {to, text}".
func shape(all []channel.Channel) string {
	parts := make([]string, 0, len(all))
	for _, c := range all {
		var fields []string
		t := c.Part()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields = append(fields, name)
		}
		parts = append(parts, c.Name()+" {"+strings.Join(fields, ", ")+"}")
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// decodeProblem turns a JSON decoding error into the answer a client can
// act on, naming the position or the field.
// offset is where the decoder stopped; holds says what the body may hold,
// for an unknown field's message.
func decodeProblem(err error, offset int64, holds string) *Problem {
	var (
		tooBig    *http.MaxBytesError
		tooDeep   *tooDeepError
		syntax    *json.SyntaxError
		wrongType *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(tooBig.Limit)
	case errors.As(err, &tooDeep):
		return malformed(tooDeep.Error())
	case errors.Is(err, io.EOF):
		return malformed("the body is empty: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("the body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return malformed(fmt.Sprintf("invalid JSON at byte offset %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: ")))
	case errors.As(err, &wrongType):
		if wrongType.Field == "" {
			return malformed(fmt.Sprintf("the body is a JSON %s: want a JSON object", wrongType.Value))
		}
		return malformed(fmt.Sprintf("field %q at byte offset %d: want %s, got a JSON %s",
			wrongType.Field, wrongType.Offset, jsonKind(wrongType.Type), wrongType.Value))
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return unknownField(fmt.Sprintf("unknown field %s before byte offset %d: %s", name, offset, holds))
	}
	return malformed(msg)
}

// batchRequest is the body of POST /v1/notifications/batch. Its items
// stay raw here: each is decoded by decodeRequest, as the single route
// decodes its body, so an item can be refused without refusing the batch.
type batchRequest struct {
	Notifications []json.RawMessage `json:"notifications"`
}

// decodeBatch reads exactly one batch request from body and returns its
// items, 1 to max of them. Its error is always a *Problem: 400 for a body
// that is not one well-formed batch, 413 for one over the limit of an
// http.MaxBytesReader, 422 (invalid-batch) for no items or too many. What
// the items hold is not looked at here.
func decodeBatch(body io.Reader, max int) ([]json.RawMessage, error) {
	var req batchRequest
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, decodeProblem(err, dec.InputOffset(), `a batch holds only "notifications", a list of notifications`)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(tooBig.Limit)
		}
		return nil, malformed(fmt.Sprintf("unexpected data after the JSON object, at byte offset %d", dec.InputOffset()))
	}
	switch n := len(req.Notifications); {
	case n == 0:
		return nil, invalidBatch(fmt.Sprintf("a batch holds 1 to %d notifications, this one none", max))
	case n > max:
		return nil, invalidBatch(fmt.Sprintf("a batch holds 1 to %d notifications, this one %d: split it", max, n))
	}
	return req.Notifications, nil
}

// jsonKind names the JSON a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Bool:
		return "true or false"
	default:
		return "a number"
	}
}

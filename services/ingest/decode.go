package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/relay-demo/relay/services/notification"
)

// request is the body of POST /v1/notifications: the parts of a
// notification. The API assigns the id, version and creation time.
type request struct {
	Email   *notification.Email   `json:"email"`
	Webhook *notification.Webhook `json:"webhook"`
	SMS     *notification.SMS     `json:"sms"`
}

// decodeRequest reads exactly one JSON object from body and validates it
// as a notification. Its error is always a *Problem: 400 for a body that is
// not one well-formed request, 413 for one over the limit of an
// http.MaxBytesReader, 422 for a notification with invalid fields.
func decodeRequest(body io.Reader) (*notification.Notification, error) {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		return nil, decodeProblem(err, dec.InputOffset())
	}
	// Exactly one value: anything but white space after it is an error.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(tooBig.Limit)
		}
		return nil, malformed(fmt.Sprintf("unexpected data after the JSON object, at byte offset %d", dec.InputOffset()))
	}
	n := &notification.Notification{V: notification.Version, Email: req.Email, Webhook: req.Webhook, SMS: req.SMS}
	if err := n.Validate(); err != nil {
		var inv notification.Invalid
		if errors.As(err, &inv) {
			return nil, invalidFields(inv)
		}
		return nil, invalidFields(notification.Invalid{{Field: "", Message: err.Error()}})
	}
	return n, nil
}

// decodeProblem turns a JSON decoding error into the answer a client can
// act on, naming the position or the field.
// offset is where the decoder stopped.
func decodeProblem(err error, offset int64) *Problem {
	var (
		tooBig    *http.MaxBytesError
		syntax    *json.SyntaxError
		wrongType *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(tooBig.Limit)
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
		return unknownField(fmt.Sprintf("unknown field %s before byte offset %d: a request holds email {to, subject, text, html} webhook {url, payload} and sms {to, text}", name, offset))
	}
	return malformed(msg)
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

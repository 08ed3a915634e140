package api

import (
	"fmt"
	"io"
)

// MaxDepth is how deep a request's JSON may nest: the request and its
// part are two levels, so a webhook's payload may nest 62 more; past it
// the answer is 400. encoding/json alone takes 10,000 levels, more than
// relay can carry: the history reads its record of a notification, with
// the payload a level further in, through the same decoder, and a
// receiver's parser, or the dashboard's page, may give up far sooner.
const MaxDepth = 64

// tooDeepError is the read error of a body nested deeper than MaxDepth.
type tooDeepError struct {
	offset int64
}

func (e *tooDeepError) Error() string {
	return fmt.Sprintf("the JSON is nested more than %d levels deep at byte offset %d", MaxDepth, e.offset)
}

// depthReader passes a JSON body on until it opens more than MaxDepth
// arrays and objects at once, then fails with a *tooDeepError: the
// decoder stops there, without building what is nested below. It reads
// brackets in strings as text; a body that is not JSON at all is the
// decoder's to refuse.
type depthReader struct {
	r   io.Reader
	err error

	offset            int64
	depth             int
	inString, escaped bool
}

func (d *depthReader) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	for i, c := range p[:n] {
		switch {
		case d.escaped:
			d.escaped = false
		case d.inString:
			d.escaped, d.inString = c == '\\', c != '"'
		case c == '"':
			d.inString = true
		case c == '[' || c == '{':
			if d.depth++; d.depth > MaxDepth {
				d.err = &tooDeepError{offset: d.offset + int64(i)}
				return i, d.err
			}
		case c == ']' || c == '}':
			d.depth--
		}
	}
	d.offset += int64(n)
	return n, err
}

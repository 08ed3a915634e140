package email

import (
	"html"
	"strconv"
	"strings"
)

// plainText renders an HTML body as the text/plain alternative of an email
// that came with HTML only, for the readers and filters that want text.
//
// Tags are dropped and character references decoded; the contents of
// head, title, script, style and template are left out. Whitespace
// collapses as a browser collapses it, except inside pre. Paragraphs,
// headings, lists, tables and other blocks end their lines (br ends one
// too), a list item starts with "- " (or its number in an ol), an image
// stands for its alt text, and a link keeps its target after its text, as
// in "your order (https://example.com/o/1)", unless the text already says
// it. It is a small converter for the HTML of notifications, not a full
// HTML5 parser: markup it does not understand is dropped, never shown.
func plainText(src string) string {
	c := converter{src: src}
	c.run()
	return c.result()
}

// maxIndent is the deepest a nested list item is indented, in steps of two
// spaces.
const maxIndent = 8

// Elements by what they do to the text around them.
var (
	// paragraphs are set apart by a blank line.
	paragraphs = set("p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "table", "blockquote", "pre", "hr",
		"figure", "address", "fieldset", "form")
	// lines start on a line of their own.
	lines = set("div", "li", "tr", "dt", "dd", "section", "article", "header", "footer", "nav", "main", "aside",
		"caption", "figcaption", "center", "body", "html", "summary", "details")
	// hidden elements' contents are not text a reader sees.
	hidden = set("head", "title", "script", "style", "template")
	// rawText elements hold text in which "<" starts no tag.
	rawText = set("script", "style", "title", "textarea")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// converter holds the state of one plainText.
type converter struct {
	src string
	i   int

	out    []byte
	space  bool  // whitespace is pending before the next text
	pre    int   // depth of pre elements
	hidden int   // depth of hidden elements
	lists  []int // the open lists: 0 for ul, the next number for ol
	links  []link
}

// link is an open a element: its target and where its text starts.
type link struct {
	href  string
	start int
}

func (c *converter) run() {
	for c.i < len(c.src) {
		j := strings.IndexByte(c.src[c.i:], '<')
		if j < 0 {
			c.text(c.src[c.i:])
			return
		}
		c.text(c.src[c.i : c.i+j])
		c.i += j
		rest := c.src[c.i:]
		switch {
		case strings.HasPrefix(rest, "<!--"):
			end := strings.Index(rest[4:], "-->")
			if end < 0 {
				return
			}
			c.i += 4 + end + 3
		case len(rest) > 1 && (rest[1] == '!' || rest[1] == '?'):
			// A doctype, a CDATA section or a processing instruction.
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				return
			}
			c.i += end + 1
		case len(rest) > 1 && isLetter(rest[1]), len(rest) > 2 && rest[1] == '/' && isLetter(rest[2]):
			c.tag()
		default:
			c.text("<")
			c.i++
		}
	}
}

// tag reads the tag at c.i and acts on it.
func (c *converter) tag() {
	c.i++ // <
	closing := c.src[c.i] == '/'
	if closing {
		c.i++
	}
	start := c.i
	for c.i < len(c.src) && !isSpace(c.src[c.i]) && c.src[c.i] != '/' && c.src[c.i] != '>' {
		c.i++
	}
	name := strings.ToLower(c.src[start:c.i])
	attrs := c.attributes()
	if closing {
		c.end(name)
		return
	}
	c.start(name, attrs)
	if rawText[name] {
		// Its text runs to the matching end tag, whatever it holds.
		end := indexFold(c.src[c.i:], "</"+name)
		if end < 0 {
			end = len(c.src) - c.i
		}
		if !hidden[name] {
			c.text(c.src[c.i : c.i+end])
		}
		c.i += end
	}
}

// attributes reads a tag's attributes up to and past its ">", names in
// lower case, values with their character references decoded.
func (c *converter) attributes() map[string]string {
	attrs := map[string]string{}
	for c.i < len(c.src) {
		for c.i < len(c.src) && (isSpace(c.src[c.i]) || c.src[c.i] == '/') {
			c.i++
		}
		if c.i >= len(c.src) {
			break
		}
		if c.src[c.i] == '>' {
			c.i++
			break
		}
		start := c.i
		for c.i < len(c.src) && !isSpace(c.src[c.i]) && c.src[c.i] != '=' && c.src[c.i] != '>' && (c.i == start || c.src[c.i] != '/') {
			c.i++
		}
		name := strings.ToLower(c.src[start:c.i])
		for c.i < len(c.src) && isSpace(c.src[c.i]) {
			c.i++
		}
		value := ""
		if c.i < len(c.src) && c.src[c.i] == '=' {
			c.i++
			for c.i < len(c.src) && isSpace(c.src[c.i]) {
				c.i++
			}
			value = c.value()
		}
		if _, dup := attrs[name]; !dup {
			attrs[name] = html.UnescapeString(value)
		}
	}
	return attrs
}

// value reads an attribute value: quoted, or up to a space or ">".
func (c *converter) value() string {
	if c.i < len(c.src) && (c.src[c.i] == '"' || c.src[c.i] == '\'') {
		q := c.src[c.i]
		c.i++
		end := strings.IndexByte(c.src[c.i:], q)
		if end < 0 {
			v := c.src[c.i:]
			c.i = len(c.src)
			return v
		}
		v := c.src[c.i : c.i+end]
		c.i += end + 1
		return v
	}
	start := c.i
	for c.i < len(c.src) && !isSpace(c.src[c.i]) && c.src[c.i] != '>' {
		c.i++
	}
	return c.src[start:c.i]
}

// start acts on an opening tag.
func (c *converter) start(name string, attrs map[string]string) {
	switch {
	case name == "body":
		// A head left open ends here.
		c.hidden = 0
	case hidden[name]:
		c.hidden++
		return
	}
	if c.hidden > 0 {
		return
	}
	switch name {
	case "br":
		c.newline()
		return
	case "pre":
		c.pre++
	case "ul", "ol":
		n := 0
		if name == "ol" {
			var err error
			if n, err = strconv.Atoi(strings.TrimSpace(attrs["start"])); err != nil || n < 1 {
				n = 1
			}
		}
		c.lists = append(c.lists, n)
		if len(c.lists) > 1 {
			// A list inside a list item goes on the next line.
			c.block(1)
			return
		}
	case "li":
		c.block(1)
		marker := "- "
		if d := len(c.lists); d > 0 {
			// Indented by depth, up to a point: a list nested
			// thousands deep must not make the text quadratic.
			c.out = append(c.out, strings.Repeat("  ", min(d-1, maxIndent))...)
			if c.lists[d-1] > 0 {
				marker = strconv.Itoa(c.lists[d-1]) + ". "
				c.lists[d-1]++
			}
		}
		c.out = append(c.out, marker...)
		c.space = false
		return
	case "td", "th":
		c.space = true
	case "img":
		c.text(attrs["alt"])
	case "a":
		c.links = append(c.links, link{href: strings.TrimSpace(attrs["href"]), start: len(c.out)})
	}
	switch {
	case paragraphs[name]:
		c.block(2)
	case lines[name]:
		c.block(1)
	}
}

// end acts on a closing tag.
func (c *converter) end(name string) {
	if hidden[name] {
		if c.hidden > 0 {
			c.hidden--
		}
		return
	}
	if c.hidden > 0 {
		return
	}
	switch name {
	case "pre":
		if c.pre > 0 {
			c.pre--
		}
	case "ul", "ol":
		if len(c.lists) > 0 {
			c.lists = c.lists[:len(c.lists)-1]
		}
		if len(c.lists) > 0 {
			c.block(1)
			return
		}
	case "td", "th":
		c.space = true
	case "a":
		if len(c.links) > 0 {
			l := c.links[len(c.links)-1]
			c.links = c.links[:len(c.links)-1]
			c.linkTarget(l)
		}
	}
	switch {
	case paragraphs[name]:
		c.block(2)
	case lines[name]:
		c.block(1)
	}
}

// linkTarget writes where a link goes after its text, where a reader could
// not tell otherwise.
func (c *converter) linkTarget(l link) {
	href := l.href
	lower := strings.ToLower(href)
	if href == "" || strings.HasPrefix(href, "#") || strings.HasPrefix(lower, "javascript:") {
		return
	}
	text := ""
	switch span := len(c.out) - l.start; {
	case span > len(href)+16:
		// Longer than any of the forms of href below, padded with the
		// few spaces and line ends a link's text can hold at its ends:
		// no need to copy it, which nested links would do over and over.
		text = "\x00"
	case span > 0:
		text = strings.TrimSpace(string(c.out[l.start:]))
	}
	switch {
	case text == "":
		c.text(href)
	case text == href, "mailto:"+text == href, "tel:"+text == href,
		strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(href, "https://"), "http://"), "/") == strings.TrimSuffix(text, "/"):
	default:
		c.space = true
		c.text("(" + href + ")")
	}
}

// text writes the text between two tags, its character references decoded.
func (c *converter) text(raw string) {
	if c.hidden > 0 || raw == "" {
		return
	}
	s := html.UnescapeString(raw)
	if c.pre > 0 {
		c.flushSpace()
		c.out = append(c.out, strings.ReplaceAll(s, "\r\n", "\n")...)
		return
	}
	fields := strings.FieldsFunc(s, isSpaceRune)
	if len(fields) == 0 {
		if s != "" {
			c.space = true
		}
		return
	}
	if isSpaceRune(firstRune(s)) {
		c.space = true
	}
	for i, f := range fields {
		if i > 0 {
			c.space = true
		}
		c.flushSpace()
		c.out = append(c.out, strings.ReplaceAll(f, "\u00a0", " ")...)
	}
	if isSpaceRune(lastRune(s)) {
		c.space = true
	}
}

// flushSpace writes the pending space, unless a line starts here.
func (c *converter) flushSpace() {
	if c.space && len(c.out) > 0 && c.out[len(c.out)-1] != '\n' && c.out[len(c.out)-1] != ' ' {
		c.out = append(c.out, ' ')
	}
	c.space = false
}

// newline ends the line, even an empty one (for br).
func (c *converter) newline() {
	c.trimSpaces()
	c.out = append(c.out, '\n')
	c.space = false
}

// block ends the line so that n line ends (2: a blank line) separate what
// came before from what follows. At the start of the text it does nothing.
func (c *converter) block(n int) {
	c.trimSpaces()
	c.space = false
	if len(c.out) == 0 {
		return
	}
	have := 0
	for k := len(c.out) - 1; k >= 0 && c.out[k] == '\n'; k-- {
		have++
	}
	for ; have < n; have++ {
		c.out = append(c.out, '\n')
	}
}

// trimSpaces drops the spaces at the end of the current line.
func (c *converter) trimSpaces() {
	for len(c.out) > 0 && c.out[len(c.out)-1] == ' ' {
		c.out = c.out[:len(c.out)-1]
	}
}

// result returns the text: no spaces at line ends, no more than one blank
// line in a row, none at either end.
func (c *converter) result() string {
	ls := strings.Split(string(c.out), "\n")
	var b strings.Builder
	blank := 0
	for _, l := range ls {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			continue
		}
		if b.Len() > 0 {
			b.WriteString(strings.Repeat("\n", min(blank, 1)+1))
		}
		blank = 0
		b.WriteString(l)
	}
	return b.String()
}

func isLetter(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' }

// isSpaceRune reports HTML's whitespace, which collapses; a no-break space
// (U+00A0) does not.
func isSpaceRune(r rune) bool { return r < 0x80 && isSpace(byte(r)) }

func firstRune(s string) rune {
	for _, r := range s {
		return r
	}
	return 0
}

func lastRune(s string) rune {
	if s == "" {
		return 0
	}
	return rune(s[len(s)-1])
}

// indexFold is strings.Index, ignoring ASCII case.
func indexFold(s, sub string) int {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], sub) {
			return i
		}
	}
	return -1
}

package email

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlainText(t *testing.T) {
	tests := []struct {
		name, html, want string
	}{
		{"text", "Hello Ada", "Hello Ada"},
		{"empty", "", ""},
		{"paragraphs", "<p>Hello Ada,</p><p>your order shipped.</p>", "Hello Ada,\n\nyour order shipped."},
		{"inline tags join words", "Your order <b>shipped</b><i>!</i>", "Your order shipped!"},
		{"whitespace collapses", "  Hello \n\t  Ada  \r\n ", "Hello Ada"},
		{"br", "one<br>two<br/>three<BR />four", "one\ntwo\nthree\nfour"},
		{"headings and divs", "<h1>Receipt</h1><div>Total</div><div>12 EUR</div>", "Receipt\n\nTotal\n12 EUR"},
		{"named entities", "Fish &amp; chips &lt;3 &eacute;t&eacute; &mdash; &euro;5 &copy;", "Fish & chips <3 été — €5 ©"},
		{"numeric entities", "&#233;&#x20AC;&#X41;", "é€A"},
		{"entity without semicolon", "AT&T &amp Co", "AT&T & Co"},
		{"no-break spaces stay", "a&nbsp;&nbsp;b", "a  b"},
		{"lone less-than", "1 < 2 and 3 <4", "1 < 2 and 3 <4"},
		{"link", `Track <a href="https://example.com/t/1">your parcel</a>.`, "Track your parcel (https://example.com/t/1)."},
		{"link entities in href", `<a href="https://example.com/?a=1&amp;b=2">go</a>`, "go (https://example.com/?a=1&b=2)"},
		{"link text is the url", `<a href="https://example.com/t/1">https://example.com/t/1</a>`, "https://example.com/t/1"},
		{"link text is the host", `<a href="https://example.com/">example.com</a>`, "example.com"},
		{"mailto", `Write to <a href="mailto:help@example.com">help@example.com</a>`, "Write to help@example.com"},
		{"mailto with other text", `<a href="mailto:help@example.com">support</a>`, "support (mailto:help@example.com)"},
		{"image link", `<a href="https://example.com/"><img src="logo.png"></a>`, "https://example.com/"},
		{"image alt", `<img src="x.png" alt="Relay logo"> Hello`, "Relay logo Hello"},
		{"fragment and javascript links", `<a href="#top">top</a> <a href="javascript:void(0)">x</a>`, "top x"},
		{"unquoted and single-quoted attributes", `<a href=https://example.com/a>a</a> <a title='x > y' href='https://example.com/b'>b</a>`,
			"a (https://example.com/a) b (https://example.com/b)"},
		{"uppercase tags", `<P>One</P><A HREF="https://example.com/x">two</A>`, "One\n\ntwo (https://example.com/x)"},
		{"unordered list", "<ul><li>eggs</li><li>milk</li></ul>after", "- eggs\n- milk\n\nafter"},
		{"ordered list", `<ol start="3"><li>three<li>four</ol>`, "3. three\n4. four"},
		{"nested list", "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>", "- a\n  - b\n- c"},
		{"table", "<table><tr><th>Item</th><th>Price</th></tr><tr><td>Tea</td><td>3</td></tr></table>", "Item Price\nTea 3"},
		{"pre keeps whitespace", "<pre>a  b\n  c</pre>d", "a  b\n  c\n\nd"},
		{"hidden parts", `<html><head><title>T</title><style>p { color: red }</style></head>
			<body><script>if (a < b) { document.write("<p>x</p>") }</script><p>Visible</p></body></html>`, "Visible"},
		{"head never closed", `<head><title>T</title><body>Body text`, "Body text"},
		{"comments and doctype", "<!DOCTYPE html><!-- a <b>comment</b> -->Hi<![CDATA[x]]>", "Hi"},
		{"unclosed comment", "Hi<!-- forever", "Hi"},
		{"tag never closed", `Hi <a href="https://example.com/`, "Hi"},
		{"blank lines collapse", "<p>a</p><p></p><br><br><br><p>b</p>", "a\n\nb"},
		{"unknown tags dropped", "<custom-tag x=1>kept</custom-tag><o:p></o:p>", "kept"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plainText(tt.html)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plainText(%q) (-want +got):\n%s", tt.html, diff)
			}
		})
	}
}

// FuzzPlainText checks that no input makes plainText panic, and that no
// tag it understands survives into the text.
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"<p>a</p>", `<a href="x">y</a>`, "<ol><li>1", "<pre>x", "<!--", "&#x;", "<a href='", "<script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := plainText(s)
		if strings.Contains(got, "<p>") && !strings.Contains(s, "&lt;p>") && !strings.Contains(s, "&lt;p&gt;") &&
			!strings.Contains(s, "<pre") && !strings.Contains(s, "<textarea") && !strings.Contains(s, "<a") {
			t.Errorf("plainText(%q) = %q, which holds a tag", s, got)
		}
	})
}

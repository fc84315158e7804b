package control

import (
	"bytes"
	"html"
	"strconv"
	"strings"

	xhtml "golang.org/x/net/html"
)

// labelCells returns the rendered page src with every data cell of a
// table that has a header row labelled with its column's header
// (data-label="state"), so that on a narrow screen, where the page's
// style stacks a row's cells one under the other, each cell says what it
// is: a table is read down, never scrolled sideways. Tables of class kv
// (a header beside each value) and cells that have a label are left as
// they are; every other byte of src is copied unchanged.
func labelCells(src []byte) []byte {
	type table struct {
		kv      bool
		headers []string
		row     int // rows begun, the header row first
		col     int
	}
	var (
		out    bytes.Buffer
		tables []*table
		th     *strings.Builder // the header cell being read, if any
		thSpan int              // its colspan
	)
	out.Grow(len(src) + len(src)/8)
	z := xhtml.NewTokenizer(bytes.NewReader(src))
	for {
		tt := z.Next()
		if tt == xhtml.ErrorToken {
			break // io.EOF: src is in memory
		}
		raw := z.Raw()
		if tt == xhtml.StartTagToken || tt == xhtml.EndTagToken {
			raw = bytes.Clone(raw) // z.Token may rewrite the buffer under it
		}
		var t *table
		if len(tables) > 0 {
			t = tables[len(tables)-1]
		}
		switch tt {
		case xhtml.StartTagToken, xhtml.EndTagToken:
			tok := z.Token()
			switch {
			case tok.Data == "table" && tt == xhtml.StartTagToken:
				tables = append(tables, &table{kv: hasClass(tok, "kv")})
			case tok.Data == "table":
				if len(tables) > 0 {
					tables = tables[:len(tables)-1]
				}
			case t == nil:
			case tok.Data == "tr" && tt == xhtml.StartTagToken:
				t.row++
				t.col = 0
			case tok.Data == "th" && tt == xhtml.StartTagToken:
				if t.row == 1 {
					th, thSpan = &strings.Builder{}, span(tok)
				}
				t.col += span(tok)
			case tok.Data == "th":
				if th != nil {
					t.headers = append(t.headers, strings.Join(strings.Fields(th.String()), " "))
					for range thSpan - 1 {
						t.headers = append(t.headers, "")
					}
					th = nil
				}
			case tok.Data == "td" && tt == xhtml.StartTagToken:
				at := t.col
				t.col += span(tok)
				if !t.kv && t.row > 1 && at < len(t.headers) && t.headers[at] != "" && !hasAttr(tok, "data-label") {
					out.Write(raw[:len(raw)-1]) // the tag less its '>'
					out.WriteString(` data-label="` + html.EscapeString(t.headers[at]) + `">`)
					continue
				}
			}
		case xhtml.TextToken:
			if th != nil {
				th.WriteString(html.UnescapeString(string(raw)))
			}
		}
		out.Write(raw)
	}
	return out.Bytes()
}

// hasClass reports whether tok's class attribute lists c.
func hasClass(tok xhtml.Token, c string) bool {
	for _, a := range tok.Attr {
		if a.Key == "class" && strings.Contains(" "+a.Val+" ", " "+c+" ") {
			return true
		}
	}
	return false
}

// hasAttr reports whether tok has the attribute key.
func hasAttr(tok xhtml.Token, key string) bool {
	for _, a := range tok.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// span is the columns a cell takes (its colspan, at least 1).
func span(tok xhtml.Token) int {
	for _, a := range tok.Attr {
		if a.Key == "colspan" {
			if n, err := strconv.Atoi(a.Val); err == nil && n > 1 && n < 100 {
				return n
			}
		}
	}
	return 1
}

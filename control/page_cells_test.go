package control

import (
	"strings"
	"testing"
)

// TestLabelCells: every data cell of a table with a header row gets its
// column's header as data-label (colspan counted, the header's markup
// and entities read as text); kv tables, cells that have a label and
// everything outside tables are left byte for byte.
func TestLabelCells(t *testing.T) {
	in := `<p>x &amp; <b>y</b></p>
<table id="a"><tr><th>name</th><th colspan="2">state &amp; <span>since</span></th><th>why</th></tr>
<tr><td class="mono">r1</td><td>up</td><td>3m</td><td data-label="own">fine</td></tr>
<tr><td colspan="3">wide</td><td>x</td></tr></table>
<table class="kv"><tr><th>config</th><td>/etc/x</td></tr></table>
<style>td > b { color: red }</style>`
	want := `<p>x &amp; <b>y</b></p>
<table id="a"><tr><th>name</th><th colspan="2">state &amp; <span>since</span></th><th>why</th></tr>
<tr><td class="mono" data-label="name">r1</td><td data-label="state &amp; since">up</td><td>3m</td><td data-label="own">fine</td></tr>
<tr><td colspan="3" data-label="name">wide</td><td data-label="why">x</td></tr></table>
<table class="kv"><tr><th>config</th><td>/etc/x</td></tr></table>
<style>td > b { color: red }</style>`
	if got := string(labelCells([]byte(in))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := string(labelCells([]byte(strings.Repeat("<i>", 3)))); got != "<i><i><i>" {
		t.Errorf("no table: %q", got)
	}
}

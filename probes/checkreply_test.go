package probes

import (
	"testing"

	"github.com/miekg/dns"

	"lbdns/configs"
)

func TestCheckReply(t *testing.T) {
	q := fuzzQuery()
	pack := func(r *dns.Msg) []byte {
		b, err := r.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	goodWire := pack(good(q))
	cut := append([]byte(nil), goodWire[:len(goodWire)-7]...)
	tcCut := append([]byte(nil), cut...)
	tcCut[2] |= 0x02
	badID := append([]byte(nil), cut...)
	badID[0] ^= 0xff

	tests := []struct {
		name       string
		reply      []byte
		chk        *configs.DNSCheck
		want       verdict
		wantDetail string
	}{
		{"good", goodWire, &configs.DNSCheck{QName: "example.test."}, verdictOK, "NOERROR, answers 2"},
		{"empty", nil, &configs.DNSCheck{QName: "example.test."}, verdictFail, "short reply: 0 bytes"},
		{"header only short", goodWire[:11], &configs.DNSCheck{QName: "example.test."}, verdictFail, "short reply: 11 bytes"},
		{"cut body", cut, &configs.DNSCheck{QName: "example.test."}, verdictFail, "malformed reply: "},
		{"cut body with tc", tcCut, &configs.DNSCheck{QName: "example.test."}, verdictTruncated, "truncated"},
		{"id checked before body", badID, &configs.DNSCheck{QName: "example.test."}, verdictFail, "id mismatch"},
		{"bad rcode name in check", goodWire, &configs.DNSCheck{QName: "example.test.", Rcodes: []string{"NOPE"}}, verdictFail, `bad check: unknown rcode "NOPE"`},
		{"bad expect in check", goodWire, &configs.DNSCheck{QName: "example.test.", Expect: "nope"}, verdictFail, `bad check: expect "nope"`},
		{"bad regexp in check", goodWire, &configs.DNSCheck{QName: "example.test.", ExpectRegexp: "("}, verdictFail, "bad check: expect_regexp"},
		{"v4-mapped expect", goodWire, &configs.DNSCheck{QName: "example.test.", Expect: "::ffff:192.0.2.1"}, verdictOK, "NOERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, detail := checkReplyOf(q, tt.reply, tt.chk)
			if v != tt.want || len(detail) < len(tt.wantDetail) || detail[:len(tt.wantDetail)] != tt.wantDetail {
				t.Errorf("checkReply = %d, %q; want %d, %q...", v, detail, tt.want, tt.wantDetail)
			}
		})
	}
}

// checkReplyOf judges reply with the judgement of s, built as a checker
// builds it; settings that do not parse fail as "bad check: ...".
func checkReplyOf(q *dns.Msg, reply []byte, s *configs.DNSCheck) (verdict, string) {
	j, err := newJudge(s)
	if err != nil {
		return verdictFail, "bad check: " + err.Error()
	}
	return checkReply(q, reply, &j)
}

// checkReply judges one raw reply to q: validate, then j. The order of the
// checks decides the Detail: header, question, TC, rcode, then the answer
// expectations.
func checkReply(q *dns.Msg, reply []byte, j *judge) (verdict, string) {
	r, v, detail := validate(q, reply)
	if v != verdictOK {
		return v, detail
	}
	ok, detail := j.judge(r)
	if !ok {
		return verdictFail, detail
	}
	return verdictOK, detail
}

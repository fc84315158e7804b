package probes

// benchJudge judges collected responses as the engine does.
type benchJudge struct {
	c *httpChecker
	p respParser
}

func newBenchJudge(c *httpChecker) *benchJudge { return &benchJudge{c: c} }

// judge parses buf, the whole response with the connection's end, and
// judges it.
func (j *benchJudge) judge(buf []byte) (string, bool) {
	j.p.reset(false, int(j.c.maxBody))
	n, done, err := j.p.feed(buf, false)
	if err != nil || !done {
		return "not done", false
	}
	return j.c.verdict(j.p.code, j.p.bodyBytes(buf[:n]))
}

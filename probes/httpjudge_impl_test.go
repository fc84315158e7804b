package probes

// benchJudge judges collected responses as the engine does.
type benchJudge struct {
	c *httpChecker
	r respCollector
	s respScratch
}

func newBenchJudge(c *httpChecker) *benchJudge { return &benchJudge{c: c} }

// judge parses buf, the whole response with the connection's end, and
// judges it.
func (j *benchJudge) judge(buf []byte) (string, bool) {
	j.r.reset(j.c)
	done, code, body, err := j.r.feed(buf, false, &j.s)
	if err != nil || !done {
		return "not done", false
	}
	return j.c.verdict(code, body)
}

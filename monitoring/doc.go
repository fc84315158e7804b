// Package monitoring holds no code: its directory ships the Prometheus
// alerting rules (alerts.yml, with their promtool tests in
// alerts_test.yml) and the Grafana dashboard (grafana-lbdns.json) for
// lbdnsd, and its Go tests check them against the metrics lbdnsd exports
// (report/testdata/metrics.txt), against the runbook (RUNBOOK.md at the
// repository's root: a section per rule, named by its runbook_url) and
// against the table of alerts of docs/running-as-a-service.md.
package monitoring

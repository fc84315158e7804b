package vip

import (
	"errors"
	"strings"
	"testing"
	"time"

	"lbdns/configs"
)

func TestApplySettings(t *testing.T) {
	off := false
	errExpire, errUDP := errors.New("no sysctl"), errors.New("no netlink")
	for _, tc := range []struct {
		name      string
		s         configs.IPVS
		expireErr error
		udpErr    error
		wantOn    bool
		wantUDP   time.Duration
		wantErrs  []error
		wantTexts []string
	}{
		{name: "defaults", wantOn: true},
		{name: "off and timeout", s: configs.IPVS{ExpireNodestConn: &off, UDPTimeout: configs.Duration{Duration: 30 * time.Second}},
			wantUDP: 30 * time.Second},
		{name: "both fail", s: configs.IPVS{UDPTimeout: configs.Duration{Duration: time.Minute}}, expireErr: errExpire, udpErr: errUDP,
			wantOn: true, wantUDP: time.Minute, wantErrs: []error{errExpire, errUDP},
			wantTexts: []string{"cannot set expire_nodest_conn: no sysctl", "cannot set IPVS udp timeout: no netlink"}},
		{name: "udp fails", s: configs.IPVS{UDPTimeout: configs.Duration{Duration: time.Minute}}, udpErr: errUDP,
			wantOn: true, wantUDP: time.Minute, wantErrs: []error{errUDP}, wantTexts: []string{"cannot set IPVS udp timeout: no netlink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotOn bool
			var gotUDP time.Duration
			err := applySettings(tc.s,
				func(on bool) error { gotOn = on; return tc.expireErr },
				func(d time.Duration) error { gotUDP = d; return tc.udpErr })
			if gotOn != tc.wantOn || gotUDP != tc.wantUDP {
				t.Errorf("set expire_nodest_conn=%v udp_timeout=%s, want %v %s", gotOn, gotUDP, tc.wantOn, tc.wantUDP)
			}
			if (err != nil) != (len(tc.wantErrs) > 0) {
				t.Fatalf("err = %v, want %v", err, tc.wantErrs)
			}
			for _, w := range tc.wantErrs {
				if !errors.Is(err, w) {
					t.Errorf("err %v does not wrap %v", err, w)
				}
			}
			for _, w := range tc.wantTexts {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err %v does not say %q", err, w)
				}
			}
		})
	}
}

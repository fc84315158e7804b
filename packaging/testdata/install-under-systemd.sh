#!/bin/sh
# Run by systemd inside the test's container (systemd-nspawn): the README's
# install commands, one step a line in /lbdns-out/steps ("NAME RC"), each
# step's output in /lbdns-out/NAME.out. The container powers off at the end.
out=/lbdns-out
step() {
	name=$1
	shift
	"$@" >"$out/$name.out" 2>&1
	echo "$name $?" >>"$out/steps"
}
step dpkg dpkg -i /lbdns-test/lbdns.deb
step check-config lbdnsd -check-config /etc/lbdns/lbdns.toml
# This host's kernel has no IPVS: the daemon runs as the unit says, but
# computes its table without applying it (the VM suite covers IPVS).
mkdir -p /etc/systemd/system/lbdnsd.service.d
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/lbdnsd -dry-run -config /etc/lbdns/lbdns.toml -log-format text\n' \
	>/etc/systemd/system/lbdnsd.service.d/dry-run.conf
systemctl daemon-reload
step enable systemctl enable --now lbdnsd
i=0
until lbctl status >/dev/null 2>&1 || [ $i -ge 30 ]; do
	sleep 1
	i=$((i + 1))
done
step status lbctl status
step active systemctl is-active lbdnsd
step show systemctl show -p User -p DynamicUser -p WatchdogUSec -p NRestarts -p Type -p StatusErrno lbdnsd
step ps ps -o user= -C lbdnsd
step reload systemctl reload lbdnsd
step status-after-reload lbctl status
step stop systemctl stop lbdnsd
step inactive systemctl is-active lbdnsd
step journal journalctl -u lbdnsd --no-pager -o cat
echo done >>"$out/steps"
systemctl poweroff

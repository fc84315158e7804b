// Package packaging holds no code: its directory ships what installs
// lbdnsd as a service (the systemd unit, the modules-load.d file, the
// Debian package's files and build-deb.sh, the man pages), and its Go
// tests check them with the tools a distribution would: systemd-analyze,
// dpkg-deb, dpkg -x and lintian.
package packaging

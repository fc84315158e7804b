package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/chromedp/chromedp"
)

// Layout is what a live page reports of its layout, read through the
// DevTools protocol (chromedp) after it loaded.
type Layout struct {
	// ScrollWidth and ClientWidth are document.documentElement's: the
	// page overflows horizontally (a scrollbar) when ScrollWidth >
	// ClientWidth.
	ScrollWidth int `json:"scrollWidth"`
	ClientWidth int `json:"clientWidth"`
	// Text is document.body.innerText: the text as rendered.
	Text string `json:"text"`
	// Overflowing lists the deepest elements whose right edge passes the
	// viewport, as "tag#id.class (right edge px)": where to look when the
	// page overflows.
	Overflowing []string `json:"overflowing"`
	// OffScreen lists the elements marked data-glance (what a reader
	// must see without scrolling sideways, such as a state column) whose
	// right edge passes the viewport, as "tag.class: text".
	OffScreen []string `json:"offScreen"`
	// Scrolling lists the elements that scroll sideways inside the page
	// (overflow-x auto or scroll, content wider than the box), as
	// "tag#id.class (content px > box px)": a table a reader must
	// scroll to read.
	Scrolling []string `json:"scrolling"`
}

// Overflows reports whether the page is wider than its window.
func (l Layout) Overflows() bool { return l.ScrollWidth > l.ClientWidth }

// layoutJS reads the Layout from the page.
const layoutJS = `(() => {
	const de = document.documentElement;
	const over = [];
	for (const el of document.body.querySelectorAll("*")) {
		const r = el.getBoundingClientRect();
		if (r.right <= de.clientWidth + 0.5) continue;
		if ([...el.children].some(c => c.getBoundingClientRect().right > de.clientWidth + 0.5)) continue;
		let name = el.tagName.toLowerCase();
		if (el.id) name += "#" + el.id;
		if (el.className && typeof el.className === "string") name += "." + el.className.trim().split(/\s+/).join(".");
		over.push(name + " (" + Math.round(r.right) + " px)");
		if (over.length >= 20) break;
	}
	const off = [];
	for (const el of document.body.querySelectorAll("[data-glance]")) {
		if (el.getBoundingClientRect().right <= de.clientWidth + 0.5) continue;
		off.push(el.tagName.toLowerCase() + "." + String(el.className).trim().split(/\s+/).join(".") + ": " + el.innerText.trim());
		if (off.length >= 20) break;
	}
	const scroll = [];
	for (const el of document.body.querySelectorAll("*")) {
		const ox = getComputedStyle(el).overflowX;
		if ((ox !== "auto" && ox !== "scroll") || el.scrollWidth <= el.clientWidth + 1) continue;
		let name = el.tagName.toLowerCase();
		if (el.id) name += "#" + el.id;
		if (el.className && typeof el.className === "string") name += "." + el.className.trim().split(/\s+/).join(".");
		scroll.push(name + " (" + el.scrollWidth + " px > " + el.clientWidth + " px)");
		if (scroll.length >= 20) break;
	}
	return {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, text: document.body.innerText, overflowing: over, offScreen: off, scrolling: scroll};
})()`

// Measure loads url in headless Chromium, driven over the DevTools
// protocol, in a window width x height pixels wide and high, waits until
// the page has loaded, and returns its Layout. Chromium runs with Flags
// and a fresh profile in a process group of its own, killed whole when
// Measure returns. The run is bounded by ctx.
func Measure(ctx context.Context, url string, width, height int) (Layout, error) {
	if width <= 0 || height <= 0 {
		return Layout{}, fmt.Errorf("browser: measure %s: window size %dx%d is not positive", url, width, height)
	}
	path, err := Find()
	if err != nil {
		return Layout{}, err
	}
	dir, err := os.MkdirTemp("", "lbdns-chromedp-")
	if err != nil {
		return Layout{}, fmt.Errorf("browser: measure %s: %w", url, err)
	}
	defer os.RemoveAll(dir)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.WindowSize(width, height),
		chromedp.Flag("hide-scrollbars", false),
	}
	for _, f := range Flags() {
		opts = append(opts, chromedp.Flag(f[2:], true))
	}
	var cmd *exec.Cmd
	opts = append(opts, chromedp.ModifyCmdFunc(func(c *exec.Cmd) {
		ownGroup(c)
		cmd = c
	}))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer func() {
		cancelAlloc()
		// Chromium's helpers may outlive its main process.
		if cmd != nil && cmd.Process != nil {
			killGroup(cmd.Process.Pid)
		}
	}()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	err = chromedp.Do(bctx,
		chromedp.EmulateViewport(int64(width), int64(height)),
		chromedp.Navigate(url),
		chromedp.WaitReady("body"),
	)
	if err != nil {
		return Layout{}, fmt.Errorf("browser: measure %s: %w", url, err)
	}
	l, err := chromedp.Run(bctx, chromedp.Evaluate[Layout](layoutJS))
	if err != nil {
		return Layout{}, fmt.Errorf("browser: measure %s: %w", url, err)
	}
	return l, nil
}

package probe

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Write renders t as text, like blackbox_exporter's debug output: "Logs
// for the probe", one line an event in the order they happened (with the
// milliseconds since the probe began), the request and response blocks
// under the lines that wrote and read them (> sent, < received, | body),
// then the result as kubelet reports it.
func (t *Transcript) Write(w io.Writer) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	b.WriteString("Logs for the probe:\n")
	for i, a := range t.r.Attempts {
		var started time.Time
		if i == 0 {
			started = t.r.Started
		}
		for _, l := range a.lines(i, len(t.r.Attempts), started) {
			l.write(&b)
		}
	}
	if f := t.r.Result; f != nil {
		b.WriteString("\nResult as kubelet reports it:\n")
		result := f.Result
		switch f.Result {
		case "warning":
			result += " (counts as a success; kubelet records a ProbeWarning event)"
		case "unknown":
			result += " (could not probe: kubelet throws the result away)"
		}
		b.WriteString("  result:   " + result + "\n")
		if f.Error != "" {
			b.WriteString("  error:    " + f.Error + "\n") // escaped by Finish
		} else {
			b.WriteString("  output:   " + strings.ReplaceAll(printable(f.Output), "\n", "\n            ") + "\n")
		}
		b.WriteString("  duration: " + millis(f.DurationMs) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// logLine is one event of a transcript's text.
type logLine struct {
	at    float64
	msg   string
	kv    []string // key=value
	block []string // lines shown under it, prefixed
}

func (l logLine) write(b *strings.Builder) {
	fmt.Fprintf(b, "%12s  %s", millis(l.at), l.msg)
	if len(l.kv) > 0 {
		b.WriteString("  " + strings.Join(l.kv, " "))
	}
	b.WriteByte('\n')
	for _, s := range l.block {
		b.WriteString(strings.Repeat(" ", 16) + s + "\n")
	}
}

// lines are attempt i's events, in time order.
func (a *Attempt) lines(i, attempts int, started time.Time) []logLine {
	begin := logLine{at: a.StartMs, msg: "Beginning probe", kv: []string{kv("probe", a.Probe), kv("target", a.Target), kv("timeout", (time.Duration(a.TimeoutMs*1000) * time.Microsecond).String())}}
	if attempts > 1 {
		begin.kv = append(begin.kv, kv("try", strconv.Itoa(i+1)+"/"+strconv.Itoa(attempts)))
	}
	if !started.IsZero() {
		begin.kv = append(begin.kv, kv("started", started.Format(time.RFC3339Nano)))
	}
	ls := []logLine{begin}
	if a.Conn != nil {
		ls = append(ls, a.Conn.lines()...)
	}
	for j, x := range a.HTTP {
		ls = append(ls, x.lines(j)...)
	}
	if g := a.GRPC; g != nil {
		ls = append(ls, g.lines()...)
	}
	if a.DoneMs > 0 {
		end := logLine{at: a.DoneMs}
		switch a.Verdict {
		case "success":
			end.msg = "Probe succeeded"
		case "warning":
			end.msg = "Probe succeeded with a warning"
		case "error":
			end.msg, end.kv = "Probe could not run", []string{kv("err", a.Error)}
		default:
			end.msg, end.kv = "Probe failed", []string{kv("cause", a.Cause)}
		}
		end.kv = append(end.kv, kv("duration", millis(a.DoneMs-a.StartMs)))
		ls = append(ls, end)
	}
	slices.SortStableFunc(ls, func(x, y logLine) int { return cmp.Compare(x.at, y.at) })
	return ls
}

// lines are how the connection was made.
func (c *Conn) lines() []logLine {
	var ls []logLine
	if d := c.DNS; d != nil {
		ls = append(ls, logLine{at: d.StartMs, msg: "Resolving target address", kv: []string{kv("host", d.Host)}})
		switch {
		case d.Error != "":
			ls = append(ls, logLine{at: d.DoneMs, msg: "Could not resolve target address", kv: []string{kv("err", d.Error)}})
		case d.DoneMs > 0:
			ls = append(ls, logLine{at: d.DoneMs, msg: "Resolved target address", kv: []string{kv("ips", strings.Join(d.Addrs, ","))}})
		}
	}
	for _, d := range c.Dials {
		ls = append(ls, logLine{at: d.StartMs, msg: "Connecting", kv: []string{kv("address", d.Address)}})
		switch {
		case d.Error != "":
			ls = append(ls, logLine{at: d.DoneMs, msg: "Connection failed", kv: []string{kv("address", d.Address), kv("err", d.Error)}})
		case d.DoneMs > 0:
			done := logLine{at: d.DoneMs, msg: "Connected", kv: []string{kv("address", d.Address)}}
			if c.Remote == d.Address && c.Local != "" {
				done.kv = append(done.kv, kv("local", c.Local))
			}
			ls = append(ls, done)
		}
	}
	if c.DialsLeftOut > 0 {
		last := c.Dials[len(c.Dials)-1]
		ls = append(ls, logLine{at: max(last.StartMs, last.DoneMs), msg: "More connection attempts, not kept", kv: []string{kv("count", strconv.Itoa(c.DialsLeftOut))}})
	}
	if t := c.TLS; t != nil {
		ls = append(ls, logLine{at: t.StartMs, msg: "TLS handshake"})
		switch {
		case t.Error != "":
			ls = append(ls, logLine{at: t.DoneMs, msg: "TLS handshake failed", kv: []string{kv("err", t.Error)}})
		case t.DoneMs > 0:
			done := logLine{at: t.DoneMs, msg: "TLS handshake done", kv: []string{kv("version", t.Version), kv("cipher", t.CipherSuite),
				kv("alpn", t.ALPN), kv("serverName", t.ServerName), kv("verified", "false (as kubelet)")}}
			for _, cert := range t.Certificates {
				done.block = append(done.block, "certificate: "+cert)
			}
			ls = append(ls, done)
		}
	}
	return ls
}

// lines are round trip i.
func (x *Exchange) lines(i int) []logLine {
	ls := []logLine{{at: x.StartMs, msg: "Making HTTP request", kv: []string{kv("roundtrip", strconv.Itoa(i)), kv("method", x.Method), kv("url", x.URL)}}}
	ls = append(ls, x.Conn.lines()...)
	if len(x.RequestHeaders) > 0 {
		sent := logLine{at: x.WrittenMs, msg: "Request written"}
		if x.WrittenMs == 0 {
			sent.at, sent.msg = x.DoneMs, "Request not written whole"
		}
		sent.block = headBlock("> ", x.RequestLine, x.RequestHeaders, x.RequestHeadersLeftOut)
		ls = append(ls, sent)
	}
	if x.StatusLine != "" {
		ls = append(ls, logLine{at: x.ResponseMs, msg: "Received HTTP response", block: headBlock("< ", x.StatusLine, x.ResponseHeaders, x.ResponseHeadersLeftOut)})
	}
	if x.Redirect != "" {
		ls = append(ls, logLine{at: x.ResponseMs, msg: "Redirect " + x.Redirect})
	}
	if x.StatusLine != "" && !strings.HasPrefix(x.Redirect, "followed") && x.DoneMs > 0 {
		read := logLine{at: x.DoneMs, msg: "Read response body", kv: []string{kv("bytes", strconv.Itoa(x.BodyBytes))}}
		if x.BodyBytes == MaxBody {
			read.kv = append(read.kv, kv("limit", "reached: the rest is not read, as kubelet"))
		}
		if x.BodyBytes > 0 {
			for _, l := range strings.Split(x.BodyExcerpt, "\n") {
				read.block = append(read.block, "| "+l)
			}
		}
		ls = append(ls, read)
	}
	if x.Error != "" {
		ls = append(ls, logLine{at: x.DoneMs, msg: "Error for HTTP request", kv: []string{kv("err", x.Error)}})
	}
	if x.DoneMs > 0 {
		ls = append(ls, logLine{at: x.DoneMs, msg: "Response timings for roundtrip", kv: []string{kv("roundtrip", strconv.Itoa(i)),
			kv("resolve", x.Conn.resolveTime()), kv("connect", x.Conn.connectTime()), kv("tls", x.Conn.tlsTime()),
			kv("processing", between(x.WrittenMs, x.FirstByteMs)), kv("transfer", between(x.FirstByteMs, x.DoneMs))}})
	}
	return ls
}

// headBlock is a request's or response's head: its first line (if any),
// then its header lines, each after prefix.
func headBlock(prefix, first string, headers []string, leftOut int) []string {
	var block []string
	if first != "" {
		block = append(block, prefix+first)
	}
	for _, h := range headers {
		block = append(block, prefix+h)
	}
	if leftOut > 0 {
		block = append(block, prefix+"… "+strconv.Itoa(leftOut)+" more header lines")
	}
	return block
}

// lines are the health check.
func (g *GRPCCall) lines() []logLine {
	var ls []logLine
	if g.ReadyMs > 0 {
		ls = append(ls, logLine{at: g.ReadyMs, msg: "Connection ready"})
	}
	if g.SentMs > 0 {
		ls = append(ls, logLine{at: g.SentMs, msg: "Health check sent", kv: []string{kv("method", g.Method), kv("service", g.Service), kv("userAgent", g.UserAgent)}})
	}
	switch {
	case g.DoneMs == 0:
	case g.Code != "":
		ls = append(ls, logLine{at: g.DoneMs, msg: "Health check failed", kv: []string{kv("code", g.Code), kv("message", g.Message),
			kv("rpc", between(g.SentMs, g.DoneMs))}})
	default:
		ls = append(ls, logLine{at: g.DoneMs, msg: "Health check answered", kv: []string{kv("status", g.Status), kv("rpc", between(g.SentMs, g.DoneMs))}})
	}
	return ls
}

func (c *Conn) resolveTime() string {
	if c.DNS == nil {
		return "-"
	}
	return between(c.DNS.StartMs, c.DNS.DoneMs)
}

// connectTime is the successful attempt's.
func (c *Conn) connectTime() string {
	for _, d := range c.Dials {
		if d.Error == "" && d.DoneMs > 0 {
			return between(d.StartMs, d.DoneMs)
		}
	}
	return "-"
}

func (c *Conn) tlsTime() string {
	if c.TLS == nil {
		return "-"
	}
	return between(c.TLS.StartMs, c.TLS.DoneMs)
}

// between is the time from start to end, "-" if either is unknown.
func between(start, end float64) string {
	if start <= 0 || end <= 0 {
		return "-"
	}
	return millis(end - start)
}

func millis(ms float64) string { return strconv.FormatFloat(ms, 'f', 3, 64) + "ms" }

// kv is key=value, the value quoted if it has a space, a quote or an
// equals sign, or is empty (values are escaped already).
func kv(key, value string) string {
	if value == "" || strings.ContainsAny(value, " \"=\t\n") {
		value = `"` + strings.NewReplacer(`"`, `\"`, "\n", `\n`, "\t", `\t`).Replace(value) + `"`
	}
	return key + "=" + value
}

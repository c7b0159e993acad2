package outboxwebhook

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/webhooksig"
)

// validCheckURL checks a Config.CheckURL.
func validCheckURL(raw string) error {
	u, err := url.Parse(strings.ReplaceAll(raw, "{id}", "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("outboxwebhook: CheckURL %s: want an absolute http or https URL", Redact(raw))
	}
	if !strings.Contains(raw, "{id}") {
		return fmt.Errorf("outboxwebhook: CheckURL %s: it must contain {id}, where the message id goes", Redact(raw))
	}
	return nil
}

// Checker returns the compensation step of Config.CheckURL, nil when none
// was set. Before a message whose last attempt ended unknown (a timeout
// after the receiver may have applied it, a relay that crashed mid-send)
// is sent again, the relay GETs the check URL, signed and with the
// configured headers like a delivery (empty body):
//
//	200 (any 2xx)  processed: the message is marked sent, not sent again
//	404 or 410     not processed: it is sent again
//	anything else  the receiver cannot say now: the relay asks again later,
//	               without sending it and without charging an attempt
//
// outboxurl.Open returns a publisher that is also this Checker when the
// URL carries check_url=….
func (p *Publisher) Checker() publisher.Checker {
	if p.check == "" {
		return nil
	}
	return checker{p}
}

type checker struct{ p *Publisher }

func (c checker) Delivered(ctx context.Context, env *publisher.Envelope) (bool, error) {
	p := c.p
	target := strings.ReplaceAll(p.check, "{id}", url.PathEscape(env.ID))
	shown := Redact(target)
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return false, fmt.Errorf("GET %s: %v", shown, err)
	}
	for k, v := range p.headers {
		req.Header[k] = v
	}
	ts := strconv.FormatInt(p.now().Unix(), 10)
	req.Header.Set(HeaderID, env.ID)
	req.Header.Set(HeaderTimestamp, ts)
	if p.key != nil {
		req.Header.Set(HeaderSignature, webhooksig.Sign(p.key, env.ID, ts, nil))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET %s: %s", shown, Redact(err.Error()))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return true, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return false, nil
	default:
		return false, fmt.Errorf("GET %s: %s", shown, resp.Status)
	}
}

package awswire

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// URL parameters the SQS and SNS destination URLs share.
const (
	ParamRegion   = "region"
	ParamEndpoint = "endpoint"
)

// URLErrors returns the function that makes the errors about the
// destination URL u: "PKG: destination U: " and the text, U without its
// user information.
func URLErrors(pkg string, u *url.URL) func(format string, a ...any) error {
	return func(format string, a ...any) error {
		return fmt.Errorf(pkg+": destination %s: "+format, append([]any{Redacted(u)}, a...)...)
	}
}

// CheckURL says what is wrong with u where the SQS and SNS destination
// URLs are alike: nil, of another scheme, or with credentials (the SDK's
// chain provides them). bad makes the errors (URLErrors).
func CheckURL(pkg, scheme string, u *url.URL, bad func(format string, a ...any) error) error {
	if u == nil {
		return errors.New(pkg + ": nil URL")
	}
	if u.Scheme != scheme {
		return bad("scheme %q is not %s", u.Scheme, scheme)
	}
	if u.User != nil {
		return bad("credentials do not go in the URL: the SDK's chain provides them (environment, profile, role)")
	}
	return nil
}

// Query is u's query once checked: each parameter one of params and given
// once, and the endpoint parameter, when given, an http(s) URL. It
// returns the region and endpoint parameters too ("" when not given).
// bad makes the errors (URLErrors).
func Query(u *url.URL, params []string, bad func(format string, a ...any) error) (q url.Values, region, endpoint string, err error) {
	q = u.Query()
	var unknown []string
	for k, vs := range q {
		if !slices.Contains(params, k) {
			unknown = append(unknown, strconv.Quote(k))
		} else if len(vs) > 1 {
			return nil, "", "", bad("parameter %s given %d times", k, len(vs))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, "", "", bad("unknown parameter %s (known: %s)", strings.Join(unknown, ", "), strings.Join(params, ", "))
	}
	region, endpoint = q.Get(ParamRegion), q.Get(ParamEndpoint)
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, "", "", bad("%s=%q is not an http(s) URL", ParamEndpoint, endpoint)
		}
	}
	return q, region, endpoint, nil
}

// Redacted is u as errors show it: without user information.
func Redacted(u *url.URL) string {
	if u == nil {
		return "<nil>"
	}
	c := *u
	c.User = nil
	return c.String()
}

package outboxurl

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// checkParams says which parameter of q is unknown (neither in known nor
// a TLS parameter) or given more than once, naming the known ones; nil
// when there is none. Parameters are checked in name order, so the same
// URL always gets the same error.
func checkParams(q url.Values, known []string) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, name) && !slices.Contains(TLSParams, name) {
			return fmt.Errorf("unknown parameter %q (known: %s)", name, strings.Join(append(slices.Clone(known), TLSParams...), ", "))
		}
		if n := len(q[name]); n > 1 {
			return fmt.Errorf("parameter %q given %d times", name, n)
		}
	}
	return nil
}

// positiveDuration reads parameter name of q as a Go duration above zero;
// an absent or empty parameter is def.
func positiveDuration(q url.Values, name string, def time.Duration) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 500ms or 5s", name, v)
	}
	return d, nil
}

// validPort reports whether a URL's port is a number from 1 to 65535.
func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}

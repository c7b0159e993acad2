package redact

import (
	"strings"
	"testing"
)

// TestConnectionStringForms: URL hides the password and Password finds it,
// whichever form a database connection string takes.
func TestConnectionStringForms(t *testing.T) {
	for _, c := range []struct{ raw, redacted, password string }{
		{"postgres://app:s3cret-pw@db:5432/app", "postgres://app:xxxxx@db:5432/app", "s3cret-pw"},
		{"postgres://db/app?password=s3cret-pw&x=1", "postgres://db/app?password=xxxxx&x=1", "s3cret-pw"},
		{"postgres://app@db/app", "postgres://xxxxx@db/app", ""},
		{"app:s3cret-pw@db:5432/app", "app:xxxxx@db:5432/app", "s3cret-pw"},
		{"app:s3c@ret/pw@db/app", "app:xxxxx@db/app", "s3c@ret/pw"},
		{"root:s3cret-pw@tcp(127.0.0.1:3306)/test", "root:xxxxx@tcp(127.0.0.1:3306)/test", "s3cret-pw"},
		{"host=db user=app password=s3cret-pw dbname=x", "host=db user=app password=xxxxx dbname=x", "s3cret-pw"},
		{`host=db password = 's3cret pw\' x' dbname=x`, "host=db password = xxxxx dbname=x", "s3cret pw' x"},
		{"host=db sslpassword=s3cret-pw sslmode=require", "host=db sslpassword=xxxxx sslmode=require", ""},
		{"host=db user=x", "host=db user=x", ""},
		{"sqlite:///tmp/x.db", "sqlite:///tmp/x.db", ""},
		{"db:5432", "db:5432", ""},
	} {
		got := URL(c.raw)
		if got != c.redacted || strings.Contains(got, "s3c") {
			t.Errorf("URL(%q) = %q, want %q", c.raw, got, c.redacted)
		}
		if got := Password(c.raw); got != c.password {
			t.Errorf("Password(%q) = %q, want %q", c.raw, got, c.password)
		}
	}
}

// TestTextScrubsResponseBodies: what a receiver answers may quote
// credentials; none of them survive Text, and ordinary errors stay as
// they are.
func TestTextScrubsResponseBodies(t *testing.T) {
	for in, want := range map[string]string{
		`HTTP 401: {"error":"bad","token":"tok-9f8e7d6c","password": "hunter2-xyz"}`:  `HTTP 401: {"error":"bad","token":"xxxxx","password": "xxxxx"}`,
		`HTTP 400: Authorization: Bearer abc.def-ghi_jkl was rejected`:                `HTTP 400: Authorization: xxxxx was rejected`,
		`HTTP 403: got bearer AbCdEf0123456789 for tenant 7`:                          `HTTP 403: got bearer xxxxx for tenant 7`,
		`HTTP 400: client_secret=s3cr3t-value&grant_type=client_credentials`:          `HTTP 400: client_secret=xxxxx&grant_type=client_credentials`,
		`HTTP 400: x-api-key: key-0a1b2c3d4e invalid`:                                 `HTTP 400: x-api-key: xxxxx invalid`,
		`HTTP 400: session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl expired`: `HTTP 400: session xxxxx expired`,
		`POST https://u:pw-5e6f@hooks.example/x: HTTP 500`:                            `POST https://u:xxxxx@hooks.example/x: HTTP 500`,
		`HTTP 500: invalid business key: not UTF-8 text`:                              `HTTP 500: invalid business key: not UTF-8 text`,
		`no route for topic "order.created"`:                                          `no route for topic "order.created"`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

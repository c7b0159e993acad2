package redact

import (
	"strings"
	"testing"
)

// TestURLEveryConnectionStringForm: the password is hidden whichever form
// a database connection string takes.
func TestURLEveryConnectionStringForm(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://app:s3cret-pw@db:5432/app":          "postgres://app:xxxxx@db:5432/app",
		"postgres://db/app?password=s3cret-pw&x=1":      "postgres://db/app?password=xxxxx&x=1",
		"app:s3cret-pw@db:5432/app":                     "app:xxxxx@db:5432/app",
		"app:s3c@ret/pw@db/app":                         "app:xxxxx@db/app",
		"root:s3cret-pw@tcp(127.0.0.1:3306)/test":       "root:xxxxx@tcp(127.0.0.1:3306)/test",
		"host=db user=app password=s3cret-pw dbname=x":  "host=db user=app password=xxxxx dbname=x",
		"host=db password = 's3cret pw\\' x' dbname=x":  "host=db password = xxxxx dbname=x",
		"host=db sslpassword=s3cret-pw sslmode=require": "host=db sslpassword=xxxxx sslmode=require",
		"sqlite:///tmp/x.db":                            "sqlite:///tmp/x.db",
		"db:5432":                                       "db:5432",
	} {
		got := URL(raw)
		if got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
		if strings.Contains(got, "s3cret") || strings.Contains(got, "ret/pw") {
			t.Errorf("URL(%q) = %q still holds the password", raw, got)
		}
	}
}

func TestPassword(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://app:s3cret-pw@db/app":         "s3cret-pw",
		"postgres://db/app?password=s3cret-pw":    "s3cret-pw",
		"postgres://app@db/app":                   "",
		"app:s3cret-pw@db/app":                    "s3cret-pw",
		"root:s3cret-pw@tcp(127.0.0.1:3306)/test": "s3cret-pw",
		"host=db password=s3cret-pw":              "s3cret-pw",
		"host=db password='s3cret pw' user=x":     "s3cret pw",
		"host=db user=x":                          "",
		"sqlite:///tmp/x.db":                      "",
	} {
		if got := Password(raw); got != want {
			t.Errorf("Password(%q) = %q, want %q", raw, got, want)
		}
	}
}

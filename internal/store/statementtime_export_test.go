package store

import (
	"context"
	"reflect"
)

// MySQLCap is the statement the store sends for sql on MySQL under ctx.
func MySQLCap(ctx context.Context, sql string) string { return mysqlCap(ctx, sql) }

// MySQLStatements are MySQL's fixed and retention statements by name.
func MySQLStatements() map[string]string {
	out := map[string]string{}
	for _, s := range []any{mysql{}.statements(), mysql{}.retention()} {
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
				out[v.Type().Field(i).Name] = f.String()
			}
		}
	}
	return out
}

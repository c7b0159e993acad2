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
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			switch f := v.Field(i); {
			case f.Kind() == reflect.Struct:
				walk(f) // a group of statements
			case f.Kind() == reflect.String && f.String() != "":
				out[v.Type().Field(i).Name] = f.String()
			}
		}
	}
	for _, s := range []any{mysql{}.statements(), mysql{}.retention()} {
		walk(reflect.ValueOf(s))
	}
	return out
}

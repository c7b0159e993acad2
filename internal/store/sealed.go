package store

import "strings"

// sealKeyHeader is the header naming the key a sealed payload is sealed
// under (seal.HeaderKeyID).
const sealKeyHeader = "outbox-seal-key"

// sealKeyExpr is the SQL text of a row's sealed-payload key id, NULL when
// the row names none (or its headers are not JSON, which MySQL and SQLite
// do not check on rows written before schema version 17).
func sealKeyExpr(dl dialect) string {
	path := `'$."` + sealKeyHeader + `"'`
	switch dl.(type) {
	case postgres:
		return "(headers->>'" + sealKeyHeader + "')"
	case mysql:
		return "(CASE WHEN JSON_VALID(headers) THEN JSON_UNQUOTE(JSON_EXTRACT(headers, " + path + ")) END)"
	}
	return "(CASE WHEN json_valid(headers) THEN json_extract(headers, " + path + ") END)"
}

// addNotSealedUnder adds "the row's payload is not sealed under any of
// keys".
func (c *cond) addNotSealedUnder(keys []string) {
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	c.add("COALESCE("+sealKeyExpr(c.dl)+", '') NOT IN ("+strings.TrimSuffix(strings.Repeat("{}, ", len(keys)), ", ")+")", args...)
}

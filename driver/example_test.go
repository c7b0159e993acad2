package driver_test

import (
	"errors"
	"fmt"

	"github.com/txoutbox/outbox/driver"
)

// codeError stands for a database driver's own error type, which carries a
// code (an SQLSTATE, an error number).
type codeError struct{ code string }

func (e *codeError) Error() string { return "ERROR: duplicate key value (SQLSTATE " + e.code + ")" }

// A driver translates by code at its edge: the outbox sees the sentinel,
// the application still finds its driver's error, with the same message.
func ExampleMark() {
	translate := func(err error) error {
		var ce *codeError
		if errors.As(err, &ce) && ce.code == "23505" {
			return driver.Mark(err, driver.ErrUniqueViolation)
		}
		return err
	}
	err := translate(fmt.Errorf("insert: %w", &codeError{code: "23505"}))

	var ce *codeError
	fmt.Println(errors.Is(err, driver.ErrUniqueViolation), errors.Is(err, driver.ErrDeadlock), errors.As(err, &ce))
	fmt.Println(err)
	// Output:
	// true false true
	// insert: ERROR: duplicate key value (SQLSTATE 23505)
}

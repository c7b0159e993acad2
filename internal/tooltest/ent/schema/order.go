// Package schema is the ent schema of the ent recipe's tests: one
// entity, an order, in the orders table the other recipes write.
package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema/field"
)

// Order is a business row written in the same transaction as its outbox
// message.
type Order struct {
	ent.Schema
}

// Fields of an order.
func (Order) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.Int64("total"),
	}
}

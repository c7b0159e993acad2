package seal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/txoutbox/outbox/seal"
)

// exampleKey is a fixed key, so that the examples need no key file. Real
// keys come from seal.NewKey, a key file (`outbox keys`) or a KMS.
var exampleKey = seal.Key{ID: "2024-05", Secret: bytes.Repeat([]byte{0x42}, seal.KeySize)}

// Seal encrypts a payload for one message: the sealed text is bound to
// the message id, so it opens for that message and no other.
func ExampleSeal() {
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	sealed, err := seal.Seal(seal.AES256GCM, exampleKey, messageID, []byte(`{"email":"ada@example.com"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("plain text visible:", strings.Contains(sealed, "ada"))

	plain, err := seal.Open(seal.AES256GCM, exampleKey, messageID, []byte(sealed))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("opened: %s\n", plain)

	// Copied into another message's row, it does not open.
	_, err = seal.Open(seal.AES256GCM, exampleKey, "0190a0a0-0000-7000-8000-00000000002b", []byte(sealed))
	fmt.Println("other message:", errors.Is(err, seal.ErrAuthentication))
	// Output:
	// plain text visible: false
	// opened: {"email":"ada@example.com"}
	// other message: true
}

// A consumer of a route that passes payloads on sealed opens each one
// with OpenPayload: the message's headers name the algorithm and the key,
// which a KeyProvider such as StaticKeys looks up. A payload that is not
// sealed comes back as it is.
func ExampleOpenPayload() {
	ctx := context.Background()
	keys, err := seal.NewStaticKeys(exampleKey)
	if err != nil {
		log.Fatal(err)
	}

	// What the producer stored and the relay passed on.
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	key, err := keys.Current(ctx)
	if err != nil {
		log.Fatal(err)
	}
	sealed, err := seal.Seal(seal.XChaCha20Poly1305, key, messageID, []byte(`{"iban":"DE89370400440532013000"}`))
	if err != nil {
		log.Fatal(err)
	}
	headers := map[string]string{
		"content-type":       "application/json",
		seal.HeaderAlgorithm: string(seal.XChaCha20Poly1305),
		seal.HeaderKeyID:     key.ID,
	}

	plain, err := seal.OpenPayload(ctx, keys, messageID, headers, []byte(sealed))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", plain)
	plain, err = seal.OpenPayload(ctx, keys, messageID, map[string]string{"content-type": "application/json"}, []byte(`{"plain":true}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", plain)
	// Output:
	// {"iban":"DE89370400440532013000"}
	// {"plain":true}
}

// Erasing a key makes everything sealed under it unreadable for good
// (crypto-shredding): one key per customer, erased on request, removes
// the customer's data from every stored message, backups included.
func ExampleStaticKeys_Erase() {
	ctx := context.Background()
	customer := seal.Key{ID: "customer:42", Secret: bytes.Repeat([]byte{0x17}, seal.KeySize)}
	keys, err := seal.NewStaticKeys(exampleKey, customer)
	if err != nil {
		log.Fatal(err)
	}
	const messageID = "0190a0a0-0000-7000-8000-00000000002a"
	sealed, err := seal.Seal(seal.AES256GCM, customer, messageID, []byte(`{"name":"Ada"}`))
	if err != nil {
		log.Fatal(err)
	}
	headers := map[string]string{seal.HeaderAlgorithm: string(seal.AES256GCM), seal.HeaderKeyID: customer.ID}

	keys.Erase(customer.ID) // the customer asked to be forgotten
	_, err = seal.OpenPayload(ctx, keys, messageID, headers, []byte(sealed))
	fmt.Println(err)
	fmt.Println("erased:", errors.Is(err, seal.ErrErased))
	// Output:
	// key erased: key customer:42 no longer exists
	// erased: true
}

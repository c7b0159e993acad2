// Package seal encrypts outbox payloads so that the outbox table, its
// replicas and backups, and the admin page never hold them in plain text
// (envelope encryption with an AEAD), and opens them again.
//
// A producer configured with outbox.Config.Seal stores a sealed payload
// as text: the standard base64 of nonce || ciphertext || tag, with the
// message id as associated data, so that a sealed payload copied to
// another row does not open. The row's headers name the algorithm
// (HeaderAlgorithm) and the key (HeaderKeyID). The relay, per route,
// either opens it and publishes the plain payload ("open": only the
// table is protected) or publishes it sealed ("pass": end to end), for
// consumers to open with OpenPayload (inbox.Message.Open).
//
// Keys come from a KeyProvider: FileKeys (a key file managed by `outbox
// keys`), StaticKeys (memory, KeysFromEnv), or an adapter of your own to
// a KMS. A SubjectKeyProvider keeps one key per data subject (e.g.
// "customer:42"); erasing that key makes every stored payload of the
// subject unreadable (crypto-shredding), and the relay dead-letters such
// messages as erased.
//
// The package depends on nothing else of the module. docs/security.md
// specifies the format for producers in other languages, the threat
// model, rotation and erasure.
package seal

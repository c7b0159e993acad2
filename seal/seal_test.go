package seal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/seal"
)

const id1 = "0190d8a2-9e1c-7a7b-8c4d-1e2f3a4b5c6d"

func key(t testing.TB, id string) seal.Key {
	t.Helper()
	k, err := seal.NewKey(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	for _, alg := range []seal.Algorithm{seal.AES256GCM, seal.XChaCha20Poly1305} {
		t.Run(string(alg), func(t *testing.T) {
			k := key(t, "k1")
			plain := []byte(`{"email":"a@example.com"}` + "\x00\xff")
			text, err := seal.Seal(alg, k, id1, plain)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(text, "example") {
				t.Fatal("sealed text holds the plaintext")
			}
			got, err := seal.Open(alg, k, id1, []byte(text))
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("Open = %q, %v", got, err)
			}
			// Another message id: the AAD binds the payload to its row.
			if _, err := seal.Open(alg, k, "0190d8a2-9e1c-7a7b-8c4d-1e2f3a4b5c6e", []byte(text)); !errors.Is(err, seal.ErrAuthentication) {
				t.Errorf("moved to another id: %v, want ErrAuthentication", err)
			}
			// The wrong key.
			if _, err := seal.Open(alg, key(t, "k1"), id1, []byte(text)); !errors.Is(err, seal.ErrAuthentication) {
				t.Errorf("wrong key: %v, want ErrAuthentication", err)
			}
			// A flipped bit anywhere.
			raw, _ := base64.StdEncoding.DecodeString(text)
			for _, i := range []int{0, len(raw) / 2, len(raw) - 1} {
				bad := bytes.Clone(raw)
				bad[i] ^= 1
				if _, err := seal.Open(alg, k, id1, []byte(base64.StdEncoding.EncodeToString(bad))); !errors.Is(err, seal.ErrAuthentication) {
					t.Errorf("bit %d flipped: %v", i, err)
				}
			}
			// Truncated: shorter than nonce and tag, and cut tags.
			for _, n := range []int{0, 5, 27, len(raw) - 1} {
				_, err := seal.Open(alg, k, id1, []byte(base64.StdEncoding.EncodeToString(raw[:n])))
				if !errors.Is(err, seal.ErrMalformed) && !errors.Is(err, seal.ErrAuthentication) {
					t.Errorf("truncated to %d: %v", n, err)
				}
			}
			if _, err := seal.Open(alg, k, id1, []byte("not base64!")); !errors.Is(err, seal.ErrMalformed) {
				t.Errorf("not base64: %v", err)
			}
			// The other algorithm does not open it.
			other := seal.AES256GCM
			if alg == other {
				other = seal.XChaCha20Poly1305
			}
			if _, err := seal.Open(other, k, id1, []byte(text)); err == nil {
				t.Error("opened under the other algorithm")
			}
		})
	}
}

func TestUnknownAlgorithmAndBadKeys(t *testing.T) {
	t.Parallel()
	k := key(t, "k1")
	if _, err := seal.Seal("rot13", k, id1, []byte("x")); !errors.Is(err, seal.ErrUnknownAlgorithm) {
		t.Errorf("Seal rot13: %v", err)
	}
	if _, err := seal.Open("rot13", k, id1, []byte("AAAA")); !errors.Is(err, seal.ErrUnknownAlgorithm) {
		t.Errorf("Open rot13: %v", err)
	}
	if _, err := seal.Seal(seal.AES256GCM, seal.Key{ID: "k", Secret: make([]byte, 16)}, id1, nil); !errors.Is(err, seal.ErrInvalidKey) {
		t.Errorf("16-byte key: %v", err)
	}
	for _, bad := range []string{"", "a b", "é", strings.Repeat("x", 256)} {
		if seal.ValidKeyID(bad) {
			t.Errorf("ValidKeyID(%q)", bad)
		}
	}
	if got := (seal.Key{ID: "k9", Secret: []byte("0123456789abcdef0123456789abcdef")}).String(); strings.Contains(got, "0123") {
		t.Errorf("Key.String shows material: %s", got)
	}
}

func TestOpenPayload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, err := seal.NewStaticKeys(key(t, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := keys.Current(ctx)
	text, _ := seal.Seal(seal.AES256GCM, cur, id1, []byte("hello"))
	h := map[string]string{"Outbox-Seal": "aes-256-gcm", "Outbox-Seal-Key": "k1"}
	got, err := seal.OpenPayload(ctx, keys, id1, h, []byte(text))
	if err != nil || string(got) != "hello" {
		t.Fatalf("OpenPayload = %q, %v", got, err)
	}
	if got, err := seal.OpenPayload(ctx, nil, id1, map[string]string{}, []byte("plain")); err != nil || string(got) != "plain" {
		t.Errorf("not sealed: %q, %v", got, err)
	}
	keys.Erase("k1")
	if _, err := seal.OpenPayload(ctx, keys, id1, h, []byte(text)); !errors.Is(err, seal.ErrErased) {
		t.Errorf("erased: %v", err)
	}
	h["outbox-seal-key"] = "k7"
	delete(h, "Outbox-Seal-Key")
	if _, err := seal.OpenPayload(ctx, keys, id1, h, []byte(text)); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("unknown: %v", err)
	}
}

func TestKeysFromEnv(t *testing.T) {
	k1, k2 := key(t, "a"), key(t, "b")
	t.Setenv("TEST_SEAL_KEYS", "b="+base64.StdEncoding.EncodeToString(k2.Secret)+", a="+base64.StdEncoding.EncodeToString(k1.Secret))
	keys, err := seal.KeysFromEnv("TEST_SEAL_KEYS")
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := keys.Current(context.Background()); cur.ID != "b" {
		t.Errorf("current %s, want b", cur.ID)
	}
	t.Setenv("TEST_SEAL_KEYS", "a=c2hvcnQ=")
	if _, err := seal.KeysFromEnv("TEST_SEAL_KEYS"); err == nil || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Errorf("short key: %v", err)
	}
}

func TestFileKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, err := seal.OpenFileKeys(path); err == nil {
		t.Fatal("opened a missing file")
	}
	id, err := seal.CreateKey(path, "", false)
	if err != nil || id != "k1" {
		t.Fatalf("CreateKey = %s, %v", id, err)
	}
	fk, err := seal.OpenFileKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	k1, err := fk.Current(ctx)
	if err != nil || k1.ID != "k1" {
		t.Fatalf("Current = %v, %v", k1, err)
	}
	text, _ := seal.Seal(seal.AES256GCM, k1, id1, []byte("x"))
	// Rotation by another writer: seen without reopening.
	if id, err := seal.CreateKey(path, "", true); err != nil || id != "k2" {
		t.Fatalf("rotate = %s, %v", id, err)
	}
	if k, _ := fk.Current(ctx); k.ID != "k2" {
		t.Errorf("current after rotation %s", k.ID)
	}
	old, err := fk.Key(ctx, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seal.Open(seal.AES256GCM, old, id1, []byte(text)); err != nil {
		t.Errorf("old key after rotation: %v", err)
	}
	// Subject keys: created on first use, stable, erasable.
	s1, err := fk.SubjectKey(ctx, "customer:42")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := fk.SubjectKey(ctx, "customer:42")
	if !bytes.Equal(s1.Secret, s2.Secret) {
		t.Error("subject key changed between uses")
	}
	if err := seal.EraseKey(path, "k2"); err == nil {
		t.Error("erased the current key")
	}
	if err := seal.EraseKey(path, "customer:42"); err != nil {
		t.Fatal(err)
	}
	if _, err := fk.Key(ctx, "customer:42"); !errors.Is(err, seal.ErrErased) {
		t.Errorf("erased key: %v", err)
	}
	if _, err := fk.SubjectKey(ctx, "customer:42"); !errors.Is(err, seal.ErrErased) {
		t.Errorf("erased subject recreated: %v", err)
	}
	if _, err := fk.Key(ctx, "nope"); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("unknown: %v", err)
	}
	b, _ := os.ReadFile(path)
	if bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(s1.Secret))) {
		t.Error("the erased secret is still in the file")
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	list, err := seal.ListKeys(path)
	if err != nil || len(list) != 3 || !list[2].Current || list[1].Erased != nil || list[0].Erased == nil {
		t.Errorf("ListKeys = %+v, %v", list, err)
	}
}

// FuzzOpen: Open never panics on any input, and never opens what Seal
// did not make for that id and key.
func FuzzOpen(f *testing.F) {
	k := seal.Key{ID: "k1", Secret: bytes.Repeat([]byte{7}, 32)}
	good, _ := seal.Seal(seal.AES256GCM, k, id1, []byte(`{"a":1}`))
	goodX, _ := seal.Seal(seal.XChaCha20Poly1305, k, id1, []byte(`{"a":1}`))
	f.Add(good, id1, "aes-256-gcm")
	f.Add(goodX, id1, "xchacha20-poly1305")
	f.Add("", "", "")
	f.Add("AAAA", id1, "aes-256-gcm")
	f.Fuzz(func(t *testing.T, text, id, alg string) {
		got, err := seal.Open(seal.Algorithm(alg), k, id, []byte(text))
		if err == nil && (id != id1 || (text != good && text != goodX) || string(got) != `{"a":1}`) {
			// Base64 with different padding bits may decode to the same
			// bytes; anything that opens must be the sealed message.
			if string(got) != `{"a":1}` || id != id1 {
				t.Fatalf("opened %q for id %q", got, id)
			}
		}
	})
}

func TestSealHeaders(t *testing.T) {
	t.Parallel()
	k := key(t, "k1")
	h := map[string]string{"x-email": "a@example.com"}
	text, err := seal.SealHeaders(seal.AES256GCM, k, id1, h)
	if err != nil || strings.Contains(text, "example") {
		t.Fatalf("SealHeaders = %q, %v", text, err)
	}
	got, err := seal.OpenHeaders(seal.AES256GCM, k, id1, text)
	if err != nil || got["x-email"] != "a@example.com" {
		t.Fatalf("OpenHeaders = %v, %v", got, err)
	}
	// Sealed headers do not open as the payload, nor a payload as headers.
	if _, err := seal.Open(seal.AES256GCM, k, id1, []byte(text)); !errors.Is(err, seal.ErrAuthentication) {
		t.Errorf("headers opened as the payload: %v", err)
	}
	payload, _ := seal.Seal(seal.AES256GCM, k, id1, []byte(`{"x":"y"}`))
	if _, err := seal.OpenHeaders(seal.AES256GCM, k, id1, payload); !errors.Is(err, seal.ErrAuthentication) {
		t.Errorf("payload opened as headers: %v", err)
	}
	// OpenMessage returns both.
	keys, _ := seal.NewStaticKeys(k)
	plain, hidden, err := seal.OpenMessage(context.Background(), keys, id1,
		map[string]string{seal.HeaderAlgorithm: "aes-256-gcm", seal.HeaderKeyID: "k1", seal.HeaderSealedHeaders: text}, []byte(payload))
	if err != nil || string(plain) != `{"x":"y"}` || hidden["x-email"] != "a@example.com" {
		t.Errorf("OpenMessage = %q %v %v", plain, hidden, err)
	}
}

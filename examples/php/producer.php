<?php
// A PHP producer of the outbox: each order row and its "order.created"
// message are written in one PDO transaction, with plain SQL. Both commit
// or neither does; the outbox relay delivers the message afterwards.
//
//   OUTBOX_PDO_DSN='pgsql:host=127.0.0.1;port=5432;dbname=app' OUTBOX_PDO_USER=app \
//   ORDERS=100 KEYS=10 php examples/php/producer.php
//
// OUTBOX_PDO_DSN is a PDO DSN (pgsql:… or mysql:…); OUTBOX_PDO_USER and
// OUTBOX_PDO_PASSWORD the credentials; OUTBOX_PDO_SCHEMA, on PostgreSQL,
// the schema that holds the tables. The tables must exist: `outbox migrate`
// for outbox_messages, and orders (id, customer, total) for the business
// rows. It prints each message id it committed, one a line.

require __DIR__ . '/pdo.php';

[$db, $pg] = connect();

$orders = (int) env('ORDERS', '10');
$keys = max(1, (int) env('KEYS', '5'));
for ($i = 1; $i <= $orders; $i++) {
    $customer = 'customer-' . ($i % $keys);
    $id = transaction($db, function (PDO $db) use ($i, $customer, $pg) {
        $db->prepare('INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)')
            ->execute([$i, $customer, $i * 100]);
        $payload = json_encode(['order_id' => $i, 'customer' => $customer, 'total' => $i * 100]);
        $headers = json_encode(['producer' => 'php']);
        // The minimal insert of the contract, plus headers; the database
        // fills in the message id, status, times and partition.
        $sql = 'INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES (?, ?, ?, ?)';
        if ($pg) {
            $stmt = $db->prepare($sql . ' RETURNING message_id');
            $stmt->execute(['order.created', $customer, $payload, $headers]);
            return $stmt->fetchColumn();
        }
        $db->prepare($sql)->execute(['order.created', $customer, $payload, $headers]);
        return $db->query('SELECT message_id FROM outbox_messages WHERE id = LAST_INSERT_ID()')->fetchColumn();
    });
    echo $id, "\n";
}

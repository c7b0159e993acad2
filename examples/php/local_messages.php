<?php
// A PHP producer that keeps its own local message table, the way the
// Laravel guide writes it: each order row and its local_messages row
// (topic, JSON payload, max_retry_times, Eloquent's timestamps) in one
// PDO transaction, with plain SQL. `outbox relay --adopt laravel`
// delivers the rows and marks them sent; this code never changes for it.
//
//   OUTBOX_PDO_DSN='mysql:host=127.0.0.1;port=3306;dbname=app' OUTBOX_PDO_USER=app \
//   ORDERS=100 php examples/php/local_messages.php
//
// OUTBOX_PDO_DSN is a PDO DSN (pgsql:… or mysql:…); OUTBOX_PDO_USER and
// OUTBOX_PDO_PASSWORD the credentials; OUTBOX_PDO_SCHEMA, on PostgreSQL,
// the schema that holds the tables. The tables must exist: local_messages
// as the guide creates it, and orders (id, customer, total). It prints
// the id of each local_messages row it committed, one a line.

require __DIR__ . '/pdo.php';

[$db, $pg] = connect();

$orders = (int) env('ORDERS', '10');
for ($i = 1; $i <= $orders; $i++) {
    $id = transaction($db, function (PDO $db) use ($i, $pg) {
        // 1. The business write: the order.
        $customer = 'customer-' . ($i % 7);
        $db->prepare('INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)')
            ->execute([$i, $customer, $i * 100]);
        // 2. Its message, as LocalMessage::create writes it: status,
        // retry_times and next_retry_at keep their column defaults.
        $payload = json_encode(['order_id' => $i, 'user_id' => $i % 7, 'amount' => $i * 100]);
        $now = gmdate('Y-m-d H:i:s');
        $sql = 'INSERT INTO local_messages (topic, payload, max_retry_times, updated_at, created_at) VALUES (?, ?, ?, ?, ?)';
        $args = ['order.created', $payload, 3, $now, $now];
        if ($pg) {
            $stmt = $db->prepare($sql . ' RETURNING id');
            $stmt->execute($args);
            return $stmt->fetchColumn();
        }
        $db->prepare($sql)->execute($args);
        return $db->lastInsertId();
    });
    echo $id, "\n";
}

<?php
// What the PHP producers share: their settings from the environment, the
// PDO connection, and a transaction the way Laravel's DB::transaction
// runs one.

// env is the environment variable $name, else $default; a required one
// (no default) that is missing ends the script with status 2.
function env(string $name, ?string $default = null): string {
    $v = getenv($name);
    if ($v === false || $v === '') {
        if ($default === null) {
            fwrite(STDERR, basename($_SERVER['argv'][0]) . ": $name is required\n");
            exit(2);
        }
        return $default;
    }
    return $v;
}

// connect opens OUTBOX_PDO_DSN (pgsql:… or mysql:…) as OUTBOX_PDO_USER
// with OUTBOX_PDO_PASSWORD, in the schema OUTBOX_PDO_SCHEMA on
// PostgreSQL, and says whether it is PostgreSQL.
function connect(): array {
    $db = new PDO(env('OUTBOX_PDO_DSN'), env('OUTBOX_PDO_USER', 'root'), env('OUTBOX_PDO_PASSWORD', ''), [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
    ]);
    $pg = $db->getAttribute(PDO::ATTR_DRIVER_NAME) === 'pgsql';
    $schema = getenv('OUTBOX_PDO_SCHEMA');
    if ($pg && $schema) {
        $db->exec('SET search_path TO ' . $db->quote($schema));
    }
    return [$db, $pg];
}

// transaction runs $fn in a transaction, committing when it returns and
// rolling back when it throws, the way Laravel's DB::transaction does.
function transaction(PDO $db, callable $fn) {
    $db->beginTransaction();
    try {
        $result = $fn($db);
        $db->commit();
        return $result;
    } catch (Throwable $e) {
        $db->rollBack();
        throw $e;
    }
}

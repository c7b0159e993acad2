// A Java producer of the outbox: each order row and its "order.created"
// message are written in one JDBC transaction, with plain SQL. Both commit
// or neither does; the outbox relay delivers the message afterwards.
//
//   java -cp /usr/share/java/postgresql.jar examples/java/Producer.java \
//     'jdbc:postgresql://127.0.0.1:5432/app?user=app' 100 10
//
// Arguments: a JDBC URL (PostgreSQL's driver or MariaDB Connector/J), the
// number of orders and of distinct customers (the business key). The
// tables must exist: `outbox migrate` for outbox_messages, and orders
// (id, customer, total) for the business rows. It prints each message id
// it committed, one a line.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

public class Producer {
    public static void main(String[] args) throws SQLException {
        if (args.length != 3) {
            System.err.println("usage: Producer JDBC_URL ORDERS KEYS");
            System.exit(2);
        }
        int orders = Integer.parseInt(args[1]);
        int keys = Math.max(1, Integer.parseInt(args[2]));
        try (Connection db = DriverManager.getConnection(args[0])) {
            db.setAutoCommit(false);
            boolean pg = db.getMetaData().getDatabaseProductName().equals("PostgreSQL");
            for (int i = 1; i <= orders; i++) {
                String customer = "customer-" + (i % keys);
                try {
                    System.out.println(placeOrder(db, pg, i, customer));
                    db.commit();
                } catch (SQLException e) {
                    db.rollback();
                    throw e;
                }
            }
        }
    }

    // placeOrder writes the order and its message in the open transaction
    // and returns the message id the database generated.
    static String placeOrder(Connection db, boolean pg, int id, String customer) throws SQLException {
        try (PreparedStatement order = db.prepareStatement("INSERT INTO orders (id, customer, total) VALUES (?, ?, ?)")) {
            order.setInt(1, id);
            order.setString(2, customer);
            order.setLong(3, id * 100L);
            order.executeUpdate();
        }
        String payload = String.format("{\"order_id\":%d,\"customer\":\"%s\",\"total\":%d}", id, customer, id * 100L);
        // PostgreSQL's driver sends strings as varchar: headers is jsonb there.
        String sql = "INSERT INTO outbox_messages (topic, business_key, payload, headers) VALUES (?, ?, ?, " + (pg ? "CAST(? AS jsonb)" : "?") + ")";
        if (pg) {
            sql += " RETURNING message_id";
        }
        try (PreparedStatement msg = db.prepareStatement(sql)) {
            msg.setString(1, "order.created");
            msg.setString(2, customer);
            msg.setString(3, payload);
            msg.setString(4, "{\"producer\":\"java\"}");
            if (pg) {
                try (ResultSet rs = msg.executeQuery()) {
                    rs.next();
                    return rs.getString(1);
                }
            }
            msg.executeUpdate();
        }
        try (PreparedStatement q = db.prepareStatement("SELECT message_id FROM outbox_messages WHERE id = LAST_INSERT_ID()");
             ResultSet rs = q.executeQuery()) {
            rs.next();
            return rs.getString(1);
        }
    }
}

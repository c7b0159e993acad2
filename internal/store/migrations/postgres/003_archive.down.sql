-- Undoes version 3: the archive and every archived message.
DROP TABLE IF EXISTS outbox_messages_archive;

-- examples/postgres/schema.sql: the term's epoch in the database, and a table
-- whose writers carry it.
--
-- zkelect_term holds one row: the epoch of the term whose leader promoted this
-- server (pgnode.sh promote writes it before the agent answers /primary with
-- 200, so before HAProxy sends any writer here). A writer reads the epoch when
-- it connects (or takes it from the leader's /status) and sends it with every
-- write; the trigger rejects a row whose epoch is not the current term's:
-- a writer of an older term on the new primary, and a writer of a newer term on
-- a former primary that was not fenced in time. FOR SHARE orders a write and
-- the next term's UPDATE of the epoch: neither passes the other.
CREATE TABLE zkelect_term (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch bigint NOT NULL,
    since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO zkelect_term (epoch) VALUES (0);

CREATE FUNCTION zkelect_check_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current bigint;
BEGIN
    SELECT epoch INTO current FROM zkelect_term FOR SHARE;
    IF NEW.epoch IS DISTINCT FROM current THEN
        RAISE EXCEPTION 'zkelect: epoch % is not the current term''s (%)', NEW.epoch, current
            USING ERRCODE = 'ZE001';
    END IF;
    RETURN NEW;
END
$$;

-- the demo table of the test and the benchmark: one row per acknowledged write
CREATE TABLE items (
    id bigint PRIMARY KEY,
    epoch bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TRIGGER items_epoch BEFORE INSERT OR UPDATE ON items
    FOR EACH ROW EXECUTE FUNCTION zkelect_check_epoch();

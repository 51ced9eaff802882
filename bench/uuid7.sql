-- bench_uuid7(): a UUIDv7 (RFC 9562) made in SQL, for the pgbench scripts of bench/reference.sh
-- on PostgreSQL versions without uuidv7() (before 18). The first 48 bits are the Unix time in
-- milliseconds, the rest random, with the version (7) and variant bits set: ids made later sort
-- later, as herald's Uuid::now_v7() ids do.
CREATE OR REPLACE FUNCTION bench_uuid7() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT encode(
        set_byte(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                                      FROM 3)
                    FROM 1 FOR 6),
            6, (get_byte(uuid_send(gen_random_uuid()), 6) & 15) | 112),
        'hex')::uuid
$$;

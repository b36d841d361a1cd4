-- Slices of counted limits (DESIGN §12 "It scales"; cluster/permit-slices.ts, store/postgres/permits.ts).
-- A replica may hold a slice of a counter (tenant, tool, keyed or resource limit): `n` places it took
-- from the counter's `in_use` at once, so that it grants and gives back calls of that key by itself,
-- with no round trip. A counter's `in_use` is then the slices of every replica plus the permits not in
-- a slice. A slice is given back whole when its instance's lease ends (with the instance's permits,
-- by whoever frees them), and in part as soon as another replica waits for the key.
CREATE TABLE permit_slices (
  instance TEXT    NOT NULL,
  key      TEXT    NOT NULL,
  n        INTEGER NOT NULL CHECK (n >= 0),
  PRIMARY KEY (instance, key)
);

-- A call granted from a slice is listed like any running call (`waitingFor` holders, `GET /v1/limits`),
-- but counts nothing by itself: its slice does. Such rows are written shortly after the grant, off its
-- path, and a call that ended by then is never written.
ALTER TABLE permits ADD COLUMN sliced BOOLEAN NOT NULL DEFAULT false;

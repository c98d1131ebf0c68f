-- `payrecon backfill`: the windows of a provider's own records already read to the end. A run reads only what no
-- finished window covers, so a second run finds nothing new and a run killed mid-window reads that window again.
CREATE TABLE backfill_windows (
    provider      text        NOT NULL,
    source        text        NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL CHECK (window_end > window_start),
    found         integer     NOT NULL,
    requests      integer     NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, source, window_start)
);

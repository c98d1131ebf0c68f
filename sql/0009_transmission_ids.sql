-- PayPal signs transmission_id|transmission_time|webhook_id|crc32(body): a different body with the same CRC32 passes
-- the signature. A transmission id already stored with another body is refused, so the receiver
-- looks it up; deliveries from before this column have none (they are not compared).
ALTER TABLE deliveries ADD COLUMN transmission_id text;
CREATE INDEX deliveries_transmission_id ON deliveries (provider, transmission_id) WHERE transmission_id IS NOT NULL;

-- issue 28 item 1: serve's continuous check sums an order's refunds (its
-- refunded and reserved amounts) for a slice of orders every round; without
-- this index each order read every refund of its tenant. Refunds are written
-- on the refund path only, never by a callback's payment.
CREATE INDEX IF NOT EXISTS refund_order ON refund (tenant_id, out_trade_no);

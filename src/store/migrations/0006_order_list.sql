-- 0006_order_list.sql — operator experience (issue 13 item 7): a tenant's
-- orders listed newest-paged by creation time (GET /v1/orders, payonce
-- order list) without a sort of the tenant's whole table. Filtered by
-- status, the list uses pay_order_status (0001).
CREATE INDEX IF NOT EXISTS pay_order_created ON pay_order (tenant_id, created_at, out_trade_no);

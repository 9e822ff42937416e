-- kvsim cost store dump, schema 1
-- 2 runs, 9 points. Load with: kvcal import --db STORE.db THIS.sql
BEGIN TRANSACTION;
PRAGMA application_id = 1263948621;
PRAGMA user_version = 1;
CREATE TABLE run(
  id INTEGER PRIMARY KEY,
  backend TEXT NOT NULL,
  device TEXT NOT NULL,
  host TEXT NOT NULL,
  driver TEXT NOT NULL,
  cuda TEXT NOT NULL,
  git_rev TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  model TEXT NOT NULL,
  dtype TEXT NOT NULL,
  tp INTEGER NOT NULL,
  quick INTEGER NOT NULL,
  notes TEXT NOT NULL,
  complete INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE point(
  run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
  op TEXT NOT NULL,
  model TEXT NOT NULL,
  dtype TEXT NOT NULL,
  tp INTEGER NOT NULL,
  p1 INTEGER NOT NULL,
  p2 INTEGER NOT NULL,
  p3 INTEGER NOT NULL,
  n INTEGER NOT NULL,
  median_ns REAL NOT NULL,
  p10_ns REAL NOT NULL,
  p90_ns REAL NOT NULL,
  UNIQUE(run_id, op, model, dtype, tp, p1, p2, p3)
);
CREATE VIEW newest_run AS
SELECT device, model, dtype, tp, op, run_id FROM (
  SELECT r.device AS device, k.model AS model, k.dtype AS dtype, k.tp AS tp, k.op AS op,
         r.id AS run_id,
         row_number() OVER (PARTITION BY r.device, k.model, k.dtype, k.tp, k.op
                            ORDER BY CASE r.backend WHEN 'cuda' THEN 0 WHEN 'cpu' THEN 0 WHEN 'spec' THEN 2 ELSE 1 END,
                                     r.started_at DESC, r.id DESC) AS rank_in_key
  FROM run AS r
  JOIN (SELECT DISTINCT run_id, op, model, tp,
               CASE WHEN op IN ('h2d', 'd2h', 'h2d_bidir', 'd2h_bidir', 'ssd_read', 'ssd_write', 'net') THEN '' ELSE dtype END AS dtype
        FROM point) AS k ON k.run_id = r.id
  WHERE r.complete = 1)
WHERE rank_in_key = 1;
INSERT INTO run VALUES(1,'cuda','NVIDIA H200','node-1','550.54.15','12.4','0123456789ab','2024-05-01T10:00:00Z','2024-05-01T10:42:17Z','llama-3-8b','bf16',1,0,'fixture: it''s a small sweep, with commas',1);
INSERT INTO run VALUES(2,'spec','H100-SXM','','','','fedcba987654','2024-06-01T00:00:00Z','2024-06-01T00:00:01Z','llama-3-8b','bf16',2,1,'',1);
INSERT INTO point VALUES(1,'attn_decode','llama-3-8b','bf16',1,16,65536,0,20,45000,44000,47000);
INSERT INTO point VALUES(1,'attn_prefill','llama-3-8b','bf16',1,512,4096,0,20,123456.7,120000.10000000001,130000.3);
INSERT INTO point VALUES(1,'gemm_qkv','llama-3-8b','bf16',1,1,0,0,50,21.5,20.25,23);
INSERT INTO point VALUES(1,'gemm_qkv','llama-3-8b','bf16',1,4096,0,0,50,310000.125,305000,320000.5);
INSERT INTO point VALUES(1,'h2d','','bf16',1,1048576,0,0,30,20000,19500,21000);
INSERT INTO point VALUES(1,'h2d','','bf16',1,1073741824,0,0,30,19000000,18800000,19400000);
INSERT INTO point VALUES(1,'ssd_read','','bf16',1,1048576,32,4,30,98765.432100000005,90000,110000);
INSERT INTO point VALUES(2,'gemm_o','llama-3-8b','bf16',2,128,0,0,1,3.7000000000000002,3.7000000000000002,3.7000000000000002);
INSERT INTO point VALUES(2,'net','','bf16',1,1000000,0,0,1,85000,85000,85000);
COMMIT;

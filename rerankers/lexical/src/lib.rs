//! Rerankers that need no model: reciprocal-rank fusion with BM25 over the candidates, and MMR diversity.

//! Rerankers for hosted rerank APIs: Cohere /v2/rerank, Jina and Voyage /v1/rerank, text-embeddings-inference /rerank.

//! Local cross-encoder reranker: a BERT sequence-classification model folder run on candle, on the CPU, offline.

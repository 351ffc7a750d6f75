//! A local gRPC fake of Qdrant's `Points` and `Collections` services on
//! 127.0.0.1:0 (the tonic server traits that `qdrant-client` generates): it
//! records every `query` request with its `api-key` header and answers from
//! a fixed, already ranked list of points, honouring `offset` and `limit`.
//! Every other method answers `UNIMPLEMENTED`.

use std::sync::{Arc, Mutex};

use qdrant_client::qdrant as q;
use qdrant_client::qdrant::collections_server::{Collections, CollectionsServer};
use qdrant_client::qdrant::points_server::{Points, PointsServer};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

#[derive(Default)]
pub struct Fake {
    /// The ranking the fake returns, closest first.
    pub points: Vec<q::ScoredPoint>,
    /// Every query request received, with its `api-key` header.
    pub requests: Mutex<Vec<(q::QueryPoints, Option<String>)>>,
    /// The vector size reported for every collection.
    pub dimension: u64,
    /// Answers this many queries with the status first (a server warming up).
    pub failures: Mutex<Vec<Status>>,
}

/// Starts the fake; returns its `http://127.0.0.1:<port>` URL.
pub async fn start(fake: Arc<Fake>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PointsServer::from_arc(fake.clone()))
            .add_service(CollectionsServer::from_arc(fake))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    url
}

#[tonic::async_trait]
impl Points for Fake {
    async fn query(&self, request: Request<q::QueryPoints>) -> Result<Response<q::QueryResponse>, Status> {
        let key = request.metadata().get("api-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let r = request.into_inner();
        self.requests.lock().unwrap().push((r.clone(), key));
        if let Some(status) = self.failures.lock().unwrap().pop() {
            return Err(status);
        }
        if r.collection_name == "broken" {
            return Err(Status::not_found("Collection `broken` doesn't exist!"));
        }
        let offset = r.offset.unwrap_or(0) as usize;
        let limit = r.limit.unwrap_or(10) as usize;
        let result = self.points.iter().skip(offset).take(limit).cloned().collect();
        Ok(Response::new(q::QueryResponse { result, ..Default::default() }))
    }

    async fn upsert(&self, _: Request<q::UpsertPoints>) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("upsert"))
    }
    async fn delete(&self, _: Request<q::DeletePoints>) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("delete"))
    }
    async fn get(&self, _: Request<q::GetPoints>) -> Result<Response<q::GetResponse>, Status> {
        Err(Status::unimplemented("get"))
    }
    async fn update_vectors(
        &self,
        _: Request<q::UpdatePointVectors>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("update_vectors"))
    }
    async fn delete_vectors(
        &self,
        _: Request<q::DeletePointVectors>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("delete_vectors"))
    }
    async fn set_payload(
        &self,
        _: Request<q::SetPayloadPoints>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("set_payload"))
    }
    async fn overwrite_payload(
        &self,
        _: Request<q::SetPayloadPoints>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("overwrite_payload"))
    }
    async fn delete_payload(
        &self,
        _: Request<q::DeletePayloadPoints>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("delete_payload"))
    }
    async fn clear_payload(
        &self,
        _: Request<q::ClearPayloadPoints>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("clear_payload"))
    }
    async fn create_field_index(
        &self,
        _: Request<q::CreateFieldIndexCollection>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("create_field_index"))
    }
    async fn delete_field_index(
        &self,
        _: Request<q::DeleteFieldIndexCollection>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("delete_field_index"))
    }
    async fn create_vector_name(
        &self,
        _: Request<q::CreateVectorNameRequest>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("create_vector_name"))
    }
    async fn delete_vector_name(
        &self,
        _: Request<q::DeleteVectorNameRequest>,
    ) -> Result<Response<q::PointsOperationResponse>, Status> {
        Err(Status::unimplemented("delete_vector_name"))
    }
    async fn search(&self, _: Request<q::SearchPoints>) -> Result<Response<q::SearchResponse>, Status> {
        Err(Status::unimplemented("search"))
    }
    async fn search_batch(&self, _: Request<q::SearchBatchPoints>) -> Result<Response<q::SearchBatchResponse>, Status> {
        Err(Status::unimplemented("search_batch"))
    }
    async fn search_groups(
        &self,
        _: Request<q::SearchPointGroups>,
    ) -> Result<Response<q::SearchGroupsResponse>, Status> {
        Err(Status::unimplemented("search_groups"))
    }
    async fn scroll(&self, _: Request<q::ScrollPoints>) -> Result<Response<q::ScrollResponse>, Status> {
        Err(Status::unimplemented("scroll"))
    }
    async fn recommend(&self, _: Request<q::RecommendPoints>) -> Result<Response<q::RecommendResponse>, Status> {
        Err(Status::unimplemented("recommend"))
    }
    async fn recommend_batch(
        &self,
        _: Request<q::RecommendBatchPoints>,
    ) -> Result<Response<q::RecommendBatchResponse>, Status> {
        Err(Status::unimplemented("recommend_batch"))
    }
    async fn recommend_groups(
        &self,
        _: Request<q::RecommendPointGroups>,
    ) -> Result<Response<q::RecommendGroupsResponse>, Status> {
        Err(Status::unimplemented("recommend_groups"))
    }
    async fn discover(&self, _: Request<q::DiscoverPoints>) -> Result<Response<q::DiscoverResponse>, Status> {
        Err(Status::unimplemented("discover"))
    }
    async fn discover_batch(
        &self,
        _: Request<q::DiscoverBatchPoints>,
    ) -> Result<Response<q::DiscoverBatchResponse>, Status> {
        Err(Status::unimplemented("discover_batch"))
    }
    async fn count(&self, _: Request<q::CountPoints>) -> Result<Response<q::CountResponse>, Status> {
        Err(Status::unimplemented("count"))
    }
    async fn update_batch(&self, _: Request<q::UpdateBatchPoints>) -> Result<Response<q::UpdateBatchResponse>, Status> {
        Err(Status::unimplemented("update_batch"))
    }
    async fn query_batch(&self, _: Request<q::QueryBatchPoints>) -> Result<Response<q::QueryBatchResponse>, Status> {
        Err(Status::unimplemented("query_batch"))
    }
    async fn query_groups(&self, _: Request<q::QueryPointGroups>) -> Result<Response<q::QueryGroupsResponse>, Status> {
        Err(Status::unimplemented("query_groups"))
    }
    async fn facet(&self, _: Request<q::FacetCounts>) -> Result<Response<q::FacetResponse>, Status> {
        Err(Status::unimplemented("facet"))
    }
    async fn search_matrix_pairs(
        &self,
        _: Request<q::SearchMatrixPoints>,
    ) -> Result<Response<q::SearchMatrixPairsResponse>, Status> {
        Err(Status::unimplemented("search_matrix_pairs"))
    }
    async fn search_matrix_offsets(
        &self,
        _: Request<q::SearchMatrixPoints>,
    ) -> Result<Response<q::SearchMatrixOffsetsResponse>, Status> {
        Err(Status::unimplemented("search_matrix_offsets"))
    }
}

#[tonic::async_trait]
impl Collections for Fake {
    async fn get(
        &self,
        request: Request<q::GetCollectionInfoRequest>,
    ) -> Result<Response<q::GetCollectionInfoResponse>, Status> {
        let _ = request;
        let vectors = q::VectorsConfig {
            config: Some(q::vectors_config::Config::Params(q::VectorParams {
                size: self.dimension,
                distance: q::Distance::Cosine as i32,
                ..Default::default()
            })),
        };
        let info = q::CollectionInfo {
            config: Some(q::CollectionConfig {
                params: Some(q::CollectionParams { vectors_config: Some(vectors), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        Ok(Response::new(q::GetCollectionInfoResponse { result: Some(info), ..Default::default() }))
    }

    async fn list(
        &self,
        _: Request<q::ListCollectionsRequest>,
    ) -> Result<Response<q::ListCollectionsResponse>, Status> {
        Err(Status::unimplemented("list"))
    }
    async fn create(
        &self,
        _: Request<q::CreateCollection>,
    ) -> Result<Response<q::CollectionOperationResponse>, Status> {
        Err(Status::unimplemented("create"))
    }
    async fn update(
        &self,
        _: Request<q::UpdateCollection>,
    ) -> Result<Response<q::CollectionOperationResponse>, Status> {
        Err(Status::unimplemented("update"))
    }
    async fn delete(
        &self,
        _: Request<q::DeleteCollection>,
    ) -> Result<Response<q::CollectionOperationResponse>, Status> {
        Err(Status::unimplemented("delete"))
    }
    async fn update_aliases(
        &self,
        _: Request<q::ChangeAliases>,
    ) -> Result<Response<q::CollectionOperationResponse>, Status> {
        Err(Status::unimplemented("update_aliases"))
    }
    async fn list_collection_aliases(
        &self,
        _: Request<q::ListCollectionAliasesRequest>,
    ) -> Result<Response<q::ListAliasesResponse>, Status> {
        Err(Status::unimplemented("list_collection_aliases"))
    }
    async fn list_aliases(
        &self,
        _: Request<q::ListAliasesRequest>,
    ) -> Result<Response<q::ListAliasesResponse>, Status> {
        Err(Status::unimplemented("list_aliases"))
    }
    async fn collection_cluster_info(
        &self,
        _: Request<q::CollectionClusterInfoRequest>,
    ) -> Result<Response<q::CollectionClusterInfoResponse>, Status> {
        Err(Status::unimplemented("collection_cluster_info"))
    }
    async fn collection_exists(
        &self,
        _: Request<q::CollectionExistsRequest>,
    ) -> Result<Response<q::CollectionExistsResponse>, Status> {
        Err(Status::unimplemented("collection_exists"))
    }
    async fn update_collection_cluster_setup(
        &self,
        _: Request<q::UpdateCollectionClusterSetupRequest>,
    ) -> Result<Response<q::UpdateCollectionClusterSetupResponse>, Status> {
        Err(Status::unimplemented("update_collection_cluster_setup"))
    }
    async fn create_shard_key(
        &self,
        _: Request<q::CreateShardKeyRequest>,
    ) -> Result<Response<q::CreateShardKeyResponse>, Status> {
        Err(Status::unimplemented("create_shard_key"))
    }
    async fn delete_shard_key(
        &self,
        _: Request<q::DeleteShardKeyRequest>,
    ) -> Result<Response<q::DeleteShardKeyResponse>, Status> {
        Err(Status::unimplemented("delete_shard_key"))
    }
    async fn list_shard_keys(
        &self,
        _: Request<q::ListShardKeysRequest>,
    ) -> Result<Response<q::ListShardKeysResponse>, Status> {
        Err(Status::unimplemented("list_shard_keys"))
    }
}

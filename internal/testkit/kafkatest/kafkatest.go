// Package kafkatest holds what the tests that run against kfake share.
package kafkatest

import "github.com/twmb/franz-go/pkg/kmsg"

// FailProduce is the answer to a produce request that fails every
// partition in it with code (for a kfake.Cluster's ControlKey).
func FailProduce(req kmsg.Request, code int16) kmsg.Response {
	preq := req.(*kmsg.ProduceRequest)
	resp := preq.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range preq.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode, sp.BaseOffset = rp.Partition, code, -1
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

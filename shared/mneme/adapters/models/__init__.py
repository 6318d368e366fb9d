"""The models Mneme calls: embedders (local ONNX, Bedrock Titan) and reasoners (Bedrock Converse,
OpenAI-compatible endpoints), with the Bedrock client they share."""

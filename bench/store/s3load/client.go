package main

// The two clients s3load drives an endpoint with (-client):
//
//	minio  MinIO's own library (minio-go): default PutObject options, i.e.
//	       over plain HTTP every 64 KiB chunk signed (aws-chunked,
//	       STREAMING-AWS4-HMAC-SHA256-PAYLOAD) and multipart in 16 MiB parts
//	       above 16 MiB; GETs without checksum mode.
//	sdk    the AWS SDK for Go v2 (service/s3), its defaults as a user meets
//	       them: one PutObject per object whatever its size (no upload
//	       manager), RequestChecksumCalculation "when supported", so over
//	       plain HTTP the SDK hashes the body itself first and sends it with
//	       a signed payload (x-amz-content-sha256 = the body's SHA-256) and an
//	       x-amz-checksum-crc32 header; over HTTPS it streams it as
//	       aws-chunked with the CRC32 in a trailer
//	       (STREAMING-UNSIGNED-PAYLOAD-TRAILER). GETs with ChecksumMode
//	       ENABLED: the SDK checks the body against the x-amz-checksum-crc32
//	       the server answers with (a whole-object one; composite ones, with
//	       "-N", are skipped).
//
// -https talks TLS to the endpoint (certificates not verified: a
// benchmark's self-signed one).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsv4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithymw "github.com/aws/smithy-go/middleware"
	"github.com/minio/minio-go/v7"
	mcreds "github.com/minio/minio-go/v7/pkg/credentials"
)

type s3client interface {
	ensureBucket(ctx context.Context) error
	put(ctx context.Context, key string, body []byte) error
	// get reads the whole body into w.
	get(ctx context.Context, key string, w io.Writer) error
	stat(ctx context.Context, key string) (int64, error)
	del(ctx context.Context, key string) error
	// clear deletes every object under pfx; the first error.
	clear(ctx context.Context, pfx string) error
}

func newClient(kind string, tr *http.Transport) (s3client, error) {
	if *https {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	switch kind {
	case "minio":
		cl, err := minio.New(*endpoint, &minio.Options{
			Creds:        mcreds.NewStaticV4(*access, *secret, ""),
			Secure:       *https,
			Transport:    tr,
			Region:       "us-east-1",
			BucketLookup: minio.BucketLookupPath,
		})
		return minioClient{cl}, err
	case "sdk":
		scheme := "http://"
		if *https {
			scheme = "https://"
		}
		cl := s3.New(s3.Options{
			Region:       "us-east-1",
			Credentials:  credentials.NewStaticCredentialsProvider(*access, *secret, ""),
			BaseEndpoint: aws.String(scheme + *endpoint),
			UsePathStyle: true,
			HTTPClient:   &http.Client{Transport: tr},
			// the SDK's defaults, spelled out
			RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
			ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
		})
		return &sdkClient{cl: cl}, nil
	}
	return nil, fmt.Errorf("-client %q: minio or sdk", kind)
}

// ---- minio-go ---------------------------------------------------------------

type minioClient struct{ cl *minio.Client }

func (m minioClient) ensureBucket(ctx context.Context) error {
	ok, err := m.cl.BucketExists(ctx, *bucket)
	if err != nil {
		return fmt.Errorf("HeadBucket: %w", err)
	}
	if !ok {
		if err := m.cl.MakeBucket(ctx, *bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
			return fmt.Errorf("CreateBucket: %w", err)
		}
	}
	return nil
}

func (m minioClient) put(ctx context.Context, key string, body []byte) error {
	_, err := m.cl.PutObject(ctx, *bucket, key, bytes.NewReader(body), int64(len(body)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	return err
}

func (m minioClient) get(ctx context.Context, key string, w io.Writer) error {
	o, err := m.cl.GetObject(ctx, *bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return err
	}
	_, err = io.Copy(w, o)
	o.Close()
	return err
}

func (m minioClient) stat(ctx context.Context, key string) (int64, error) {
	st, err := m.cl.StatObject(ctx, *bucket, key, minio.StatObjectOptions{})
	return st.Size, err
}

func (m minioClient) del(ctx context.Context, key string) error {
	return m.cl.RemoveObject(ctx, *bucket, key, minio.RemoveObjectOptions{})
}

func (m minioClient) clear(ctx context.Context, pfx string) error {
	objs := make(chan minio.ObjectInfo)
	var listErr, first error
	go func() {
		defer close(objs)
		for o := range m.cl.ListObjects(ctx, *bucket, minio.ListObjectsOptions{Prefix: pfx, Recursive: true}) {
			if o.Err != nil {
				listErr = o.Err
				return
			}
			objs <- o
		}
	}()
	for e := range m.cl.RemoveObjects(ctx, *bucket, objs, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && first == nil {
			first = e.Err
		}
	}
	if listErr != nil { // read after objs was closed
		return listErr
	}
	return first
}

// ---- AWS SDK for Go v2 ------------------------------------------------------

type sdkClient struct {
	cl  *s3.Client
	pre *prehashState // -prehash
}

// prehashState holds SHA-256 and CRC32 over the bytes every body shares (all
// but its last 8): a body's values are that state plus its last 8 bytes.
type prehashState struct {
	sha    []byte // sha256 digest's MarshalBinary
	crc    uint32
	prefix int
}

func newPrehash(shared []byte) *prehashState {
	h := sha256.New()
	h.Write(shared)
	st, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic(err)
	}
	return &prehashState{sha: st, crc: crc32.ChecksumIEEE(shared), prefix: len(shared)}
}

// sums returns body's payload hash (hex SHA-256) and CRC32 (base64, as the
// x-amz-checksum-crc32 header carries it).
func (p *prehashState) sums(body []byte) (string, string) {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(p.sha); err != nil {
		panic(err)
	}
	tail := body[p.prefix:]
	h.Write(tail)
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.Update(p.crc, crc32.IEEETable, tail))
	return hex.EncodeToString(h.Sum(nil)), base64.StdEncoding.EncodeToString(crc[:])
}

func (c *sdkClient) ensureBucket(ctx context.Context) error {
	_, err := c.cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bucket})
	if err == nil {
		return nil
	}
	var nf *s3types.NotFound
	if !errors.As(err, &nf) {
		return fmt.Errorf("HeadBucket: %w", err)
	}
	if _, err := c.cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		return fmt.Errorf("CreateBucket: %w", err)
	}
	return nil
}

// payloadMode records the x-amz-content-sha256 the SDK signed with, so a
// run can say which upload mode it measured.
var (
	payloadModeMu sync.Mutex
	payloadMode   = ""
)

func getPayloadMode() string {
	payloadModeMu.Lock()
	defer payloadModeMu.Unlock()
	return payloadMode
}

// putReady holds, per SDK PUT, the time from the call to the request ready
// to go (the SDK's own hashing of the body, SHA-256 and CRC32 over plain
// HTTP, and signing): client time during which the server sees nothing of
// that PUT.
var (
	putReadyMu sync.Mutex
	putReady   []time.Duration
)

func (c *sdkClient) put(ctx context.Context, key string, body []byte) error {
	t0 := time.Now()
	var ready time.Time
	in := &s3.PutObjectInput{
		Bucket:        bucket,
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	}
	payloadHash := ""
	if c.pre != nil {
		var crc string
		payloadHash, crc = c.pre.sums(body)
		in.ChecksumCRC32 = aws.String(crc) // the SDK sends it, computes none
	}
	_, err := c.cl.PutObject(ctx, in, func(o *s3.Options) {
		if payloadHash != "" {
			// first in Finalize: the signer's ComputePayloadSHA256 finds
			// it set and reads nothing
			o.APIOptions = append(o.APIOptions, func(st *smithymw.Stack) error {
				return st.Finalize.Add(smithymw.FinalizeMiddlewareFunc("s3loadPayloadHash",
					func(ctx context.Context, in smithymw.FinalizeInput, next smithymw.FinalizeHandler) (
						smithymw.FinalizeOutput, smithymw.Metadata, error) {
						return next.HandleFinalize(awsv4.SetPayloadHash(ctx, payloadHash), in)
					}), smithymw.Before)
			})
		}
		if getPayloadMode() == "" {
			o.APIOptions = append(o.APIOptions, recordPayloadMode)
		}
		o.APIOptions = append(o.APIOptions, func(st *smithymw.Stack) error {
			return st.Finalize.Add(smithymw.FinalizeMiddlewareFunc("s3loadReady",
				func(ctx context.Context, in smithymw.FinalizeInput, next smithymw.FinalizeHandler) (
					smithymw.FinalizeOutput, smithymw.Metadata, error) {
					if ready.IsZero() { // the first attempt's
						ready = time.Now()
					}
					return next.HandleFinalize(ctx, in)
				}), smithymw.After)
		})
	})
	if err == nil && !ready.IsZero() {
		putReadyMu.Lock()
		putReady = append(putReady, ready.Sub(t0))
		putReadyMu.Unlock()
	}
	return err
}

// recordPayloadMode notes the first signed request's payload hash mode.
func recordPayloadMode(st *smithymw.Stack) error {
	return st.Finalize.Add(smithymw.FinalizeMiddlewareFunc("s3loadPayloadMode",
		func(ctx context.Context, in smithymw.FinalizeInput, next smithymw.FinalizeHandler) (
			smithymw.FinalizeOutput, smithymw.Metadata, error) {
			if h := awsv4.GetPayloadHash(ctx); h != "" {
				if len(h) == 64 && !strings.Contains(h, "-") {
					h = "signed payload (SHA-256)"
				}
				payloadModeMu.Lock()
				if payloadMode == "" {
					payloadMode = h
				}
				payloadModeMu.Unlock()
			}
			return next.HandleFinalize(ctx, in)
		}), smithymw.After)
}

func (c *sdkClient) get(ctx context.Context, key string, w io.Writer) error {
	o, err := c.cl.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String(key),
		ChecksumMode: s3types.ChecksumModeEnabled})
	if err != nil {
		return err
	}
	_, err = io.Copy(w, o.Body) // the SDK's CRC32 check fails the read's end
	o.Body.Close()
	whole := o.ChecksumCRC32 != nil && !strings.Contains(*o.ChecksumCRC32, "-")
	if err == nil && whole {
		crcChecked.Add(1)
	}
	if err == nil && !whole && c.pre != nil {
		// -prehash bodies differ only in their last 8 bytes: without the
		// whole-object CRC32 nothing checked the rest
		err = fmt.Errorf("-prehash: GET %s without a whole-object x-amz-checksum-crc32 to check", key)
	}
	return err
}

func (c *sdkClient) stat(ctx context.Context, key string) (int64, error) {
	o, err := c.cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	return aws.ToInt64(o.ContentLength), nil
}

func (c *sdkClient) del(ctx context.Context, key string) error {
	_, err := c.cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(key)})
	return err
}

func (c *sdkClient) clear(ctx context.Context, pfx string) error {
	p := s3.NewListObjectsV2Paginator(c.cl, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: aws.String(pfx)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]s3types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = s3types.ObjectIdentifier{Key: o.Key}
		}
		out, err := c.cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: bucket,
			Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("DeleteObjects: %s: %s", aws.ToString(out.Errors[0].Key),
				aws.ToString(out.Errors[0].Message))
		}
	}
	return nil
}

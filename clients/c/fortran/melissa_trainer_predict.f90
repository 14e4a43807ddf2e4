!> melissa_trainer_predict: the trainer's current model asked for a prediction, from
!> Fortran (mt_predict of melissa_trainer.h; docs/protocol.md, section 16). Module
!> melissa_trainer re-exports it: use that one.
!>
!>     real(c_float) :: u(n), guess(n)
!>     integer(c_int64_t) :: version
!>     integer :: ierr
!>     call mt_predict(client, 'u', u, 'prediction', guess, version, 0.5_c_double, ierr)
!>     if (ierr == MT_ETIMEDOUT .or. ierr == MT_EREFUSED .or. ierr == MT_EREPLY) then
!>       guess = u                      ! fall back
!>     else if (ierr /= MT_OK) then     ! inputs or outputs that are not the trainer's
!>       error stop 'mt_predict'
!>     end if
!>
!> One input and one output, both real(c_float) or both real(c_double), arrays of any
!> rank (contiguous). The input is sent as the trainer declared it, in C order: a
!> Fortran array u(nx, ny) is the shape (ny, nx) (as mt_send). The output's element
!> count must be the array's size (MT_ESHAPE otherwise; the array's contents are then
!> unspecified). More arrays, other types: the C function through mt_predict_c
!> (melissa_trainer_c), with mt_input_c and mt_output_c.
!>
!> Pass `ierr`: a prediction that is not there (the trainer not serving yet, busy,
!> restarting, gone) is the usual case to fall back from, and without `ierr` every
!> error stops the program (as in the rest of the module). A trainer whose process is
!> gone is not waited for: MT_ETIMEDOUT at once (mt_predict of melissa_trainer.h).
!> mt_predict_refusal says why the trainer refused, and how long it suggests waiting.
module melissa_trainer_predict
  use, intrinsic :: iso_c_binding
  use melissa_trainer_c
  use melissa_trainer_core
  implicit none
  private

  public :: mt_predict, mt_predict_refusal, mt_set_serve_endpoints

  interface mt_predict
    module procedure predict_f32, predict_f64
  end interface

contains

  !> Serving endpoints (comma-separated, in training-rank order), instead of
  !> MELISSA_TRAINER_SERVE_ENDPOINTS and the rendezvous directory; their CURVE key, if
  !> they use CURVE, from MELISSA_TRAINER_SERVE_KEY (as for SERVE_ENDPOINTS).
  subroutine mt_set_serve_endpoints(client, endpoints, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: endpoints
    integer, intent(out), optional :: ierr
    call mt_finish(client, int(mt_set_serve_endpoints_c(client%handle, c_string(endpoints))), &
                   'mt_set_serve_endpoints', ierr)
  end subroutine

  !> Why the last mt_predict was refused (MT_REFUSAL_NONE if it was not) and the
  !> seconds the trainer suggests waiting before asking again (0: no suggestion).
  function mt_predict_refusal(client, retry_after_s) result(code)
    type(mt_client_t), intent(in) :: client
    real(c_double), intent(out), optional :: retry_after_s
    integer :: code
    real(c_double) :: retry
    code = int(mt_predict_refusal_c(client%handle, retry))
    if (present(retry_after_s)) retry_after_s = retry
  end function

  !> `text` without trailing blanks, NUL-terminated, as characters.
  subroutine to_chars(text, chars)
    character(len=*), intent(in) :: text
    character(kind=c_char), intent(out) :: chars(:)
    integer :: i
    do i = 1, len_trim(text)
      chars(i) = text(i:i)
    end do
    chars(len_trim(text) + 1) = c_null_char
  end subroutine

  !> The common part of the mt_predict specifics.
  subroutine predict_raw(client, in_name, dtype, in_data, in_shape, out_name, out_data, &
                         out_size, contiguous, version, timeout_s, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: in_name, out_name
    integer, intent(in) :: dtype
    type(c_ptr), intent(in) :: in_data, out_data
    integer(c_int64_t), intent(in) :: in_shape(:), out_size
    logical, intent(in) :: contiguous
    integer(c_int64_t), intent(out) :: version
    real(c_double), intent(in) :: timeout_s
    integer, intent(out), optional :: ierr
    character(kind=c_char), target :: in_chars(len_trim(in_name) + 1)
    character(kind=c_char), target :: out_chars(len_trim(out_name) + 1)
    integer(c_int64_t), target :: c_shape(max(1, size(in_shape)))
    type(mt_input_c) :: inputs(1)
    type(mt_output_c) :: outputs(1)
    integer :: k, n, status
    character(len=40) :: got, want
    version = -1
    if (.not. contiguous) then
      call mt_finish(client, MT_EINVAL, 'mt_predict', ierr, "mt_predict needs contiguous " &
                     // "arrays (whole arrays or contiguous sections); copy these first")
      return
    end if
    n = size(in_shape)
    do k = 1, n  ! the Fortran shape reversed: the same memory in C order
      c_shape(k) = in_shape(n - k + 1)
    end do
    call to_chars(in_name, in_chars)
    call to_chars(out_name, out_chars)
    inputs(1) = mt_input_c(c_loc(in_chars), in_data, c_loc(c_shape), int(dtype, c_int), &
                           int(n, c_int))
    outputs(1)%name = c_loc(out_chars)
    outputs(1)%data = out_data
    outputs(1)%capacity = out_size
    outputs(1)%dtype = int(dtype, c_int)
    status = int(mt_predict_c(client%handle, inputs, 1_c_size_t, outputs, 1_c_size_t, &
                              timeout_s, version))
    if (status == MT_OK .and. outputs(1)%count /= out_size) then
      write (got, '(i0)') outputs(1)%count
      write (want, '(i0)') out_size
      call mt_finish(client, MT_ESHAPE, 'mt_predict', ierr, "mt_predict: output '" // &
                     trim(out_name) // "' has " // trim(got) // " elements, the array " // &
                     trim(want))
      return
    end if
    call mt_finish(client, status, 'mt_predict', ierr)
  end subroutine

  subroutine predict_f32(client, input_name, input, output_name, output, version, &
                         timeout_s, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: input_name, output_name
    real(c_float), dimension(..), intent(in), target :: input
    real(c_float), dimension(..), intent(inout), target :: output
    integer(c_int64_t), intent(out) :: version
    real(c_double), intent(in) :: timeout_s
    integer, intent(out), optional :: ierr
    call predict_raw(client, input_name, MT_FLOAT32, c_loc(input), &
                     shape(input, kind=c_int64_t), output_name, c_loc(output), &
                     int(size(output), c_int64_t), &
                     is_contiguous(input) .and. is_contiguous(output), version, timeout_s, ierr)
  end subroutine

  subroutine predict_f64(client, input_name, input, output_name, output, version, &
                         timeout_s, ierr)
    type(mt_client_t), intent(inout) :: client
    character(len=*), intent(in) :: input_name, output_name
    real(c_double), dimension(..), intent(in), target :: input
    real(c_double), dimension(..), intent(inout), target :: output
    integer(c_int64_t), intent(out) :: version
    real(c_double), intent(in) :: timeout_s
    integer, intent(out), optional :: ierr
    call predict_raw(client, input_name, MT_FLOAT64, c_loc(input), &
                     shape(input, kind=c_int64_t), output_name, c_loc(output), &
                     int(size(output), c_int64_t), &
                     is_contiguous(input) .and. is_contiguous(output), version, timeout_s, ierr)
  end subroutine
end module melissa_trainer_predict
